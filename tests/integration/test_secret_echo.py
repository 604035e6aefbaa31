"""An upstream that echoes our Authorization header must not leak the api key anywhere we write.

A stub vLLM in its own process answers chat calls with 401 (quoting the header) or 500 (dumping
every request header). A real `ng_run` serves vllm_model, simple_agent and the weather
environment over it; the real `ng_collect_rollouts` runs rows through the agent. The key is
looked for in the model server's answer, its /metrics, every failure row, the collector's
output and ng_run's log.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.real_chain import MODEL, collect, set_fault, stack_yaml, start_stack, url_of, write_rows
from tests.fixtures.stack.harness import NgRun
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

KEY = "sk-live-7f3a9c1e5b2d4a6f8e0c"
ROWS = 3


@pytest.fixture(scope="module")
def upstream() -> Iterator[StubProcess]:
    with StubProcess(api_key=KEY) as stub:
        yield stub


@pytest.fixture(scope="module")
def running(upstream: StubProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NgRun]:
    model = {"max_attempts": 2, "backoff_s": 0.01, "health_probe_interval_s": 0.2, "request_deadline_s": 2}
    run = start_stack(
        tmp_path_factory.mktemp("echo"), stack_yaml(upstream.base_url, model=model), api_key=KEY
    )
    try:
        yield run
    finally:
        run.kill_everything()


def post(url: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.parametrize(("fault", "status"), [("echo_auth_401", 401), ("echo_auth_500", 502)])
def test_an_echoed_key_reaches_no_answer_failure_row_or_log(
    running: NgRun, upstream: StubProcess, tmp_path: Path, fault: str, status: int
) -> None:
    set_fault(upstream.root_url, fault)
    write_rows(tmp_path / "in.jsonl", ROWS)
    try:
        model_status, model_answer = post(f"{url_of(running, MODEL)}/v1/responses", b'{"input": "hi"}')
        result = collect(running, tmp_path, "+max_attempts=1")
        with urllib.request.urlopen(f"{url_of(running, MODEL)}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
    finally:
        set_fault(upstream.root_url, "none")

    assert model_status == status
    assert "***" in model_answer  # the echo arrived, redacted
    assert result.returncode == 1, result.stderr
    failures = (tmp_path / "out_failures.jsonl").read_text().splitlines()
    assert len(failures) == ROWS
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
    set_fault(upstream.root_url, "echo_auth_401")
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
        set_fault(upstream.root_url, "none")
