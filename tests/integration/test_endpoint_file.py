"""`endpoint_file`: the engine moves mid-collection and the model server follows, losing nothing.

    ng_collect_rollouts -> head -> simple_agent -> vllm_model -> stub vLLM A   (endpoint file: A)
                                                               \\-> stub vLLM B (file rewritten: B)

The real `ng_run` stack and collector; the engines are stub vLLM processes (so one can be killed
for real). While rollouts are being collected the file is rewritten to name B, and A is then
SIGKILLed: requests still running on A at that moment fail over to B, new ones go to B, and every
row of the input ends up in the output with its reward.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
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
MODEL_KEY = "policy_model.responses_api_models.vllm_model"
ROWS = 60


def _chat_calls(stub: StubProcess) -> int:
    with urllib.request.urlopen(f"{stub.root_url}/_stub/stats", timeout=5) as answer:
        return int(json.loads(answer.read())["calls"]["chat"])


def _wait_for(predicate: Any, what: str, timeout_s: float = HANG_CAP_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def test_endpoint_file_rewritten_mid_collection_loses_no_rollout(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text("{}\n")
    env = {**os.environ, "NG_ENV_YAML": str(tmp_path / "env.yaml")}
    endpoint_file = tmp_path / "endpoint.txt"
    ready = tmp_path / "ready.json"
    rows = [
        {
            "responses_create_params": {
                "input": [{"role": "user", "content": "Paris is sunny at 24 degrees."}]
            },
            "expected_city": "Paris",
            "row": i,
        }
        for i in range(ROWS)
    ]
    (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    with StubProcess(delay_s=0.3) as first, StubProcess(delay_s=0.3) as second:
        endpoint_file.write_text(f"{first.base_url}\n")
        log = (tmp_path / "ng_run.log").open("w")
        run = subprocess.Popen(
            [
                str(BIN / "ng_run"),
                "+config_paths=[" + ",".join(CONFIGS) + "]",
                "+policy_base_url=http://127.0.0.1:9/v1",  # never used: the file wins
                "+policy_api_key=stub-key",
                "+policy_model_name=stub-model",
                f"++{MODEL_KEY}.endpoint_file={endpoint_file}",
                f"++{MODEL_KEY}.endpoint_check_interval_s=0.1",
                "++head_server.port=0",
                f"+ready_file={ready}",
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait_for(lambda: ready.exists() or run.poll() is not None, "ng_run to be ready")
            assert run.poll() is None, (tmp_path / "ng_run.log").read_text()
            head_url = json.loads(ready.read_text())["head_url"]
            collect = subprocess.Popen(
                [
                    str(BIN / "ng_collect_rollouts"),
                    f"+agent_name={AGENT}",
                    f"+head_server_url={head_url}",
                    "+input_jsonl_fpath=in.jsonl",
                    "+output_jsonl_fpath=out.jsonl",
                    "+num_samples_in_parallel=8",
                    "+responses_create_params.max_output_tokens=200",
                ],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            _wait_for(lambda: _lines(tmp_path / "out.jsonl") >= 5, "the first rollouts")
            endpoint_file.write_text(f"{second.base_url}\n")
            _wait_for(lambda: _chat_calls(second) > 0, "the model server to follow the file")
            calls_on_first = _chat_calls(first)
            first.kill()
            _, stderr = collect.communicate(timeout=180)
        finally:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=HANG_CAP_S)
            log.close()
    assert collect.returncode == 0, stderr
    output = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert sorted(row["_ng_task_index"] for row in output) == list(range(ROWS))
    assert all(row["reward"] == 1.0 for row in output), orjson.dumps(output[0]).decode()
    assert not (tmp_path / "out_failures.jsonl").exists() or not (tmp_path / "out_failures.jsonl").read_text()
    assert calls_on_first >= 5
    assert "upstream endpoints changed" in (tmp_path / "ng_run.log").read_text()
