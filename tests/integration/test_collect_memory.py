"""The input is streamed, never loaded: peak memory does not grow with the input file's size.

The collector runs as the real console script against a stub agent that holds every request,
so the pool fills and the producer must stop at the bounded queue. Its peak RSS (VmHWM) with a
~100 MB input is compared with a tiny one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.rollouts.stub_agent import StubAgent, StubFaults

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COLLECT = Path(sys.executable).with_name("ng_collect_rollouts")
PARALLEL = 8


@pytest.fixture
def holding_agent() -> Iterator[tuple[StubAgent, str]]:
    agent = StubAgent(StubFaults(hang_s=2.0))
    with serve_in_thread(agent.build_app()) as url:
        yield agent, url


def write_input(path: Path, num_rows: int) -> Path:
    padding = "x" * 500
    with path.open("wb") as out:
        for i in range(num_rows):
            out.write(
                orjson.dumps({"id": i, "responses_create_params": {"input": padding}, "fault": "hang"})
                + b"\n"
            )
    return path


def peak_rss_kib(tmp_path: Path, source: Path, agent: StubAgent, url: str) -> int:
    """Start the collector, wait until all its workers are busy, read its peak RSS, kill it."""
    (tmp_path / "env.yaml").write_text("{}\n")
    env = {**os.environ, "NG_ENV_YAML": str(tmp_path / "env.yaml")}
    calls_before = sum(agent.calls.values())
    process = subprocess.Popen(
        [
            str(COLLECT),
            "+agent_name=stub",
            f"+agent_urls.stub={url}",
            f"+input_jsonl_fpath={source}",
            f"+output_jsonl_fpath={source.with_suffix('.out.jsonl')}",
            f"+num_samples_in_parallel={PARALLEL}",
            "+rollout_timeout_s=60",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + HANG_CAP_S
        while sum(agent.calls.values()) - calls_before < PARALLEL:
            assert process.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.3)  # let the producer fill the queue as far as it can
        status = Path(f"/proc/{process.pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=HANG_CAP_S)


def test_peak_memory_does_not_follow_input_size(tmp_path: Path, holding_agent: tuple[StubAgent, str]) -> None:
    agent, url = holding_agent
    small = write_input(tmp_path / "small.jsonl", 100)
    large = write_input(tmp_path / "large.jsonl", 200_000)
    assert large.stat().st_size > 100 * 1024 * 1024
    small_kib = peak_rss_kib(tmp_path, small, agent, url)
    large_kib = peak_rss_kib(tmp_path, large, agent, url)
    # ~2 bytes per task and ~9 per rollout of bookkeeping (about 2 MB here); loading the rows would
    # add well over the file's 100 MB.
    assert large_kib - small_kib < 25 * 1024, (small_kib, large_kib)
