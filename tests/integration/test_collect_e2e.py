"""End to end: the real `ng_run` stack, found through its head server by `ng_collect_rollouts`.

    ng_collect_rollouts -> head GET /servers -> simple_agent -> vllm_model -> stub vLLM
                                                      \\-> example_single_tool_call

Every piece is the shipped one, in its own process; only the engine is the stub vLLM (its reply
is "Echo: <last user text>"). The rows are written so that the echo reports the right weather
for some of them, which the real environment then scores 1.0, and the wrong one for the others.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
AGENT = "example_single_tool_call_simple_agent"
CONFIGS = [
    "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
    "responses_api_models/vllm_model/configs/vllm_model.yaml",
]
# (what the user says, the city the row expects): the stub echoes the text back as its answer.
ROWS = [
    ("Paris is sunny at 24 degrees.", "Paris"),
    ("London is rainy at 15 degrees.", "London"),
    ("Oslo is snowy at -3 degrees.", "Oslo"),
    ("Tokyo is sunny at 30 degrees.", "Tokyo"),  # wrong: Tokyo is cloudy, 19
    ("What is the weather in Lima?", "Lima"),
]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "env.yaml").write_text("{}\n")
    return {**os.environ, "NG_ENV_YAML": str(tmp_path / "env.yaml")}


@pytest.fixture
def head_url(tmp_path: Path, env: dict[str, str]) -> Iterator[str]:
    """Start the stack with ng_run and yield its head server's URL; SIGTERM it afterwards."""
    with _stack(tmp_path, env) as ready:
        yield ready["head_url"]


@contextmanager
def _stack(tmp_path: Path, env: dict[str, str], *overrides: str) -> Iterator[dict[str, Any]]:
    """ng_run over the stub engine; yields its ready file's contents."""
    ready = tmp_path / "ready.json"
    with StubProcess() as engine:
        command = [
            str(BIN / "ng_run"),
            "+config_paths=[" + ",".join(CONFIGS) + "]",
            f"+policy_base_url={engine.base_url}",
            "+policy_api_key=stub-key",
            "+policy_model_name=stub-model",
            "++head_server.port=0",
            f"+ready_file={ready}",
            *overrides,
        ]
        log = (tmp_path / "ng_run.log").open("w")
        run = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            deadline = time.monotonic() + HANG_CAP_S
            while not ready.exists():
                assert run.poll() is None, (tmp_path / "ng_run.log").read_text()
                assert time.monotonic() < deadline, (tmp_path / "ng_run.log").read_text()
                time.sleep(0.05)
            yield json.loads(ready.read_text())
        finally:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=HANG_CAP_S)
            log.close()


def test_collect_through_head_server_discovery(tmp_path: Path, env: dict[str, str], head_url: str) -> None:
    rows = [
        {"responses_create_params": {"input": [{"role": "user", "content": text}]}, "expected_city": city}
        for text, city in ROWS
    ]
    (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    result = subprocess.run(
        [
            str(BIN / "ng_collect_rollouts"),
            f"+agent_name={AGENT}",
            f"+head_server_url={head_url}",
            "+input_jsonl_fpath=in.jsonl",
            "+output_jsonl_fpath=out.jsonl",
            "+num_repeats=2",
            "+responses_create_params.max_output_tokens=200",
            "+responses_create_params.temperature=0.7",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    output = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in output) == [
        (t, k) for t in range(len(ROWS)) for k in range(2)
    ]
    for row in output:
        text, city = ROWS[row["_ng_task_index"]]
        assert row["expected_city"] == city
        assert row["responses_create_params"]["temperature"] == 0.7
        assert row["response"]["output"][-1]["content"][0]["text"] == f"Echo: {text}"
        assert row["reward"] == (1.0 if row["_ng_task_index"] < 3 else 0.0)
    metrics = json.loads((tmp_path / "out_metrics.json").read_text())
    numbers = metrics["agents"][AGENT]
    assert numbers["mean_reward"] == pytest.approx(0.6)
    assert numbers["pass@2"] == pytest.approx(0.6)
    assert numbers["output_tokens"] > 0
    assert "all 10 rollouts have a reward" in result.stderr


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_agent_workers_share_one_port_and_the_load(tmp_path: Path, env: dict[str, str]) -> None:
    workers = f"++{AGENT}.responses_api_agents.simple_agent.num_workers=3"
    with _stack(tmp_path, env, workers) as ready:
        (agent,) = [server for server in ready["servers"] if server["name"] == AGENT]
        pids = agent["worker_pids"]
        assert len(set(pids)) == 3
        assert agent["pid"] == pids[0]
        before = {pid: _cpu_ticks(pid) for pid in pids}
        rows = [
            {"responses_create_params": {"input": [{"role": "user", "content": text}]}, "expected_city": city}
            for text, city in ROWS
        ]
        (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
        result = subprocess.run(
            [str(BIN / "ng_collect_rollouts"), f"+agent_name={AGENT}", f"+head_server_url={ready['head_url']}",
             "+input_jsonl_fpath=in.jsonl", "+output_jsonl_fpath=out.jsonl", "+num_repeats=40",
             "+num_samples_in_parallel=64"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        busy = [pid for pid in pids if _cpu_ticks(pid) - before[pid] >= 2]  # >= 20 ms of CPU each

    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "out.jsonl").read_bytes().splitlines()) == 200
    assert len(busy) >= 2, "the kernel gave every connection to one worker"
