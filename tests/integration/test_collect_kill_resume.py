"""SIGKILL the collector halfway through 500 rollouts, run the same command again: nothing lost.

The collector runs as the real console script in a subprocess; the stub agent (small random
latency) runs in this process on loopback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.rollouts.stub_agent import StubAgent, StubFaults

pytestmark = pytest.mark.integration

COLLECT = Path(sys.executable).with_name("ng_collect_rollouts")
TASKS, REPEATS = 100, 5


@pytest.fixture
def agent_url() -> Iterator[str]:
    agent = StubAgent(StubFaults(seed=3, latency_s=(0.005, 0.03)))
    with serve_in_thread(agent.build_app()) as url:
        yield url


def command(agent_url: str) -> list[str]:
    return [
        str(COLLECT),
        "+agent_name=stub",
        f"+agent_urls.stub={agent_url}",
        "+input_jsonl_fpath=in.jsonl",
        "+output_jsonl_fpath=out.jsonl",
        f"+num_repeats={REPEATS}",
        "+num_samples_in_parallel=8",
        "+progress_interval_s=0.5",
    ]


def environment(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "env.yaml").write_text("{}\n")
    return {**os.environ, "NG_ENV_YAML": str(tmp_path / "env.yaml")}


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_sigkill_halfway_then_resume_gives_every_rollout_exactly_once(tmp_path: Path, agent_url: str) -> None:
    rows = [
        {"id": i, "responses_create_params": {"input": f"q{i}"}, "expected_reward": i % 3 / 2}
        for i in range(TASKS)
    ]
    (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    output = tmp_path / "out.jsonl"
    args, env = command(agent_url), environment(tmp_path)

    first = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + HANG_CAP_S
    while line_count(output) < TASKS * REPEATS // 2:
        assert first.poll() is None, f"the collector ended before it was killed: {first.stderr.read()!r}"  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.005)
    first.send_signal(signal.SIGKILL)
    assert first.wait(timeout=HANG_CAP_S) == -signal.SIGKILL
    first.stderr.close()  # type: ignore[union-attr]
    written_before = line_count(output)
    assert TASKS * REPEATS // 2 <= written_before < TASKS * REPEATS
    assert output.read_bytes().endswith(b"\n"), "a SIGKILL must never leave a torn line"

    # Another tool's half-written line must be tolerated too: repaired, and said so.
    with output.open("ab") as out:
        out.write(b'{"_ng_task_index": 3, "_ng_rollout_index": 4, "rew')

    second = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "torn" in second.stderr
    assert "all 500 rollouts have a reward" in second.stderr

    lines = output.read_bytes().split(b"\n")
    assert lines[-1] == b""
    parsed = [orjson.loads(line) for line in lines[:-1]]
    pairs = Counter((row["_ng_task_index"], row["_ng_rollout_index"]) for row in parsed)
    assert len(parsed) == TASKS * REPEATS
    assert set(pairs) == {(t, r) for t in range(TASKS) for r in range(REPEATS)}
    assert max(pairs.values()) == 1
    for row in parsed:
        assert row["id"] == row["_ng_task_index"]
        assert row["reward"] == rows[row["id"]]["expected_reward"]
    metrics = orjson.loads((tmp_path / "out_metrics.json").read_bytes())
    assert metrics["run"]["resumed_rollouts"] == written_before
    assert metrics["run"]["succeeded"] == TASKS * REPEATS - written_before
