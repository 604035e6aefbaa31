"""An upstream that echoes our Authorization header must not leak the api key anywhere we write.

A stub vLLM in its own process answers chat calls with 401 (quoting the header) or 500 (dumping
every request header). A real `ng_run` serves vllm_model, simple_agent and the weather
environment over it; the real `ng_collect_rollouts` runs rows through the agent. The key is
looked for in the model server's answer, its /metrics, every failure row, the collector's
output and ng_run's log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.stack.harness import MARKER_VAR, NgRun
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-live-7f3a9c1e5b2d4a6f8e0c"
ROWS = [{"responses_create_params": {"input": f"What is the weather in city {i}?"}} for i in range(3)]


def stack_yaml(base_url: str) -> str:
    return f"""\
weather:
  resources_servers:
    example_single_tool_call:
      entrypoint: app.py
policy_model:
  responses_api_models:
    vllm_model:
      entrypoint: app.py
      base_url: {base_url}
      api_key: ${{policy_api_key}}
      model: stub-model
      return_token_id_information: false
      uses_reasoning_parser: false
      max_attempts: 2
      backoff_s: 0.01
      health_probe_interval_s: 0.2
      request_deadline_s: 2
agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      resources_server: {{type: resources_servers, name: weather}}
      model_server: {{type: responses_api_models, name: policy_model}}
      model_call: {{max_attempts: 1}}
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[StubProcess]:
    with StubProcess(api_key=KEY) as stub:
        yield stub


@pytest.fixture(scope="module")
def running(upstream: StubProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NgRun]:
    tmp = tmp_path_factory.mktemp("echo")
    (tmp / "stack.yaml").write_text(stack_yaml(upstream.base_url))
    (tmp / "env.yaml").write_text(f"policy_api_key: {KEY}\n")
    env = {**os.environ, "NG_ENV_YAML": str(tmp / "env.yaml"), MARKER_VAR: uuid.uuid4().hex}
    env.pop("NG_REPO_ROOT", None)
    ready = tmp / "ready.json"
    run = NgRun(
        ["-c", str(tmp / "stack.yaml"), "++head_server.port=0", f"+ready_file={ready}"],
        ready_file=ready,
        env=env,
    )
    try:
        run.wait_ready()
        yield run
    finally:
        run.kill_everything()


def set_fault(upstream: StubProcess, fault: str) -> None:
    request = urllib.request.Request(
        f"{upstream.root_url}/_stub/fault", data=json.dumps({"fault": fault}).encode(), method="POST"
    )
    urllib.request.urlopen(request, timeout=10).close()


def url_of(run: NgRun, name: str) -> str:
    return next(server["url"] for server in run.stack["servers"] if server["name"] == name)


def post(url: str, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def collect(run: NgRun, tmp: Path) -> subprocess.CompletedProcess[str]:
    (tmp / "in.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    (tmp / "env.yaml").write_text("{}\n")  # the collector does not know the key: the servers must hide it
    env = {**os.environ, "NG_ENV_YAML": str(tmp / "env.yaml"), "COLUMNS": "200"}
    return subprocess.run(
        [
            str(Path(sys.executable).with_name("ng_collect_rollouts")),
            "+agent_name=agent",
            f"+head_server_url={run.stack['head_url']}",
            "+input_jsonl_fpath=in.jsonl",
            "+output_jsonl_fpath=out.jsonl",
            "+max_attempts=1",
            "+overwrite=true",
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("fault", "status"), [("echo_auth_401", 401), ("echo_auth_500", 502)])
def test_an_echoed_key_reaches_no_answer_failure_row_or_log(
    running: NgRun, upstream: StubProcess, tmp_path: Path, fault: str, status: int
) -> None:
    set_fault(upstream, fault)
    try:
        model_status, model_answer = post(f"{url_of(running, 'policy_model')}/v1/responses", {"input": "hi"})
        result = collect(running, tmp_path)
        with urllib.request.urlopen(f"{url_of(running, 'policy_model')}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
    finally:
        set_fault(upstream, "none")

    assert model_status == status
    assert "***" in model_answer  # the echo arrived, redacted
    assert result.returncode == 1, result.stderr
    failures = (tmp_path / "out_failures.jsonl").read_text().splitlines()
    assert len(failures) == len(ROWS)
    assert all("***" in row for row in failures)
    for where, text in {
        "model answer": model_answer,
        "failure rows": "\n".join(failures),
        "collector output": result.stdout + result.stderr,
        "metrics": metrics,
        "ng_run log": running.output,
    }.items():
        assert KEY not in text, where


def test_the_echo_really_carries_the_key(upstream: StubProcess) -> None:
    """The stub does echo: without redaction, the key would be in its answer."""
    set_fault(upstream, "echo_auth_401")
    try:
        request = urllib.request.Request(
            f"{upstream.base_url}/chat/completions",
            data=b"{}",
            headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(request, timeout=10)
        assert KEY in raised.value.read().decode()
    finally:
        set_fault(upstream, "none")
