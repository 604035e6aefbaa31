"""What a model server refuses before any upstream call: oversized bodies (413), token caps <= 0 and
sampling values no upstream accepts (400), and routes it does not have (404), in our error envelope.

vllm_model runs as its own process, started as ng_run starts it, over a stub vLLM in another
process; the stub's request counter proves nothing was forwarded.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from ng_cli.servers.testing import ChildServer, serve_in_child
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "responses_api_models" / "vllm_model" / "app.py"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def upstream() -> Iterator[StubProcess]:
    with StubProcess() as stub:
        yield stub


@pytest.fixture(scope="module")
def model(upstream: StubProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChildServer]:
    block = {
        "base_url": upstream.base_url,
        "api_key": "stub-key",
        "model": "stub-model",
        "return_token_id_information": False,
        "uses_reasoning_parser": False,
        "max_request_bytes": 4 * MIB,
    }
    with serve_in_child(APP, block, name="policy_model", spec_dir=tmp_path_factory.mktemp("spec")) as server:
        yield server


def request(
    server: ChildServer, method: str, path: str, body: bytes | None = None, **headers: str
) -> tuple[int, dict[str, Any]]:
    host, port = server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json", **headers})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def chat_calls(upstream: StubProcess) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=10)
    connection.request("GET", "/_stub/stats")
    calls = json.loads(connection.getresponse().read())["calls"]["chat"]
    connection.close()
    return int(calls)


@pytest.mark.parametrize(
    ("path", "field", "value"),
    [
        ("/v1/responses", "max_output_tokens", 0),
        ("/v1/responses", "max_output_tokens", -5),
        ("/v1/responses", "max_output_tokens", "12"),
        ("/v1/chat/completions", "max_tokens", 0),
        ("/v1/chat/completions", "max_tokens", -1),
        ("/v1/chat/completions", "max_completion_tokens", -100),
        ("/v1/chat/completions", "n", -1),
        ("/v1/chat/completions", "n", 0),
        ("/v1/chat/completions", "n", True),
        ("/v1/responses", "temperature", -5),
        ("/v1/chat/completions", "temperature", -5),
        ("/v1/chat/completions", "temperature", "hot"),
        ("/v1/responses", "top_p", 1.5),
        ("/v1/chat/completions", "top_p", -0.1),
    ],
)
def test_a_value_no_upstream_accepts_is_a_400_that_never_reaches_the_upstream(
    model: ChildServer, upstream: StubProcess, path: str, field: str, value: Any
) -> None:
    before = chat_calls(upstream)
    body: dict[str, Any] = (
        {"input": "hi"} if path == "/v1/responses" else {"messages": [{"role": "user", "content": "hi"}]}
    )

    status, answer = request(model, "POST", path, json.dumps({**body, field: value}).encode())

    assert status == 400
    error = answer["error"]
    assert error["param"] == field
    assert field in error["message"]
    assert repr(value) in error["message"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert chat_calls(upstream) == before


@pytest.mark.usefixtures("upstream")
@pytest.mark.parametrize(
    ("path", "fields"),
    [
        ("/v1/responses", {"max_output_tokens": 8}),
        ("/v1/responses", {"temperature": 0, "top_p": 1}),
        ("/v1/chat/completions", {"n": 1, "temperature": 1.5, "top_p": 0.9}),
    ],
)
def test_values_in_range_still_go_through(model: ChildServer, path: str, fields: dict[str, Any]) -> None:
    body: dict[str, Any] = (
        {"input": "hi"} if path == "/v1/responses" else {"messages": [{"role": "user", "content": "hi"}]}
    )
    status, answer = request(model, "POST", path, json.dumps({**body, **fields}).encode())
    assert status == 200, answer
    assert answer["object"] == ("response" if path == "/v1/responses" else "chat.completion")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/nope", 404), ("POST", "/v1/nope", 404), ("GET", "/v1/responses", 405)],
)
def test_unknown_routes_answer_in_the_error_envelope(
    model: ChildServer, method: str, path: str, status: int
) -> None:
    got, answer = request(model, method, path)

    assert got == status
    assert path in answer["error"]["message"]
    assert answer["error"]["code"] == status
    assert answer["error"]["server"] == "policy_model"
    assert "detail" not in answer


def test_a_declared_oversized_body_is_refused_before_it_is_read(
    model: ChildServer, upstream: StubProcess
) -> None:
    before = chat_calls(upstream)
    host, port = model.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:  # headers only: the answer must come without a byte of the body sent
        connection.putrequest("POST", "/v1/responses")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(300 * MIB))
        connection.endheaders()
        response = connection.getresponse()
        status, answer = response.status, json.loads(response.read())
    finally:
        connection.close()

    assert status == 413
    assert answer["error"]["type"] == "RequestTooLargeError"
    assert f"{300 * MIB} bytes declared" in answer["error"]["message"]
    assert "max_request_bytes=4194304" in answer["error"]["message"]
    assert chat_calls(upstream) == before


def _oversized_body() -> bytes:
    return b'{"input": "' + b"y" * (6 * MIB) + b'"}'  # 1.5x the limit, more than a socket buffers


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_urllib_which_writes_the_whole_body_before_reading_gets_the_413(
    model: ChildServer, upstream: StubProcess, declared: bool
) -> None:
    """Before: a declared oversized body was refused with `Connection: close` while urllib was
    still writing it, so urllib got a connection reset instead of the answer (curl, which reads
    first, saw the 413)."""
    before = chat_calls(upstream)
    body = _oversized_body()
    data: Any = body if declared else iter([body[i : i + MIB] for i in range(0, len(body), MIB)])
    call = urllib.request.Request(
        f"{model.url}/v1/responses", data=data, headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(call, timeout=60)

    assert info.value.code == 413
    error = json.loads(info.value.read())["error"]
    assert error["type"] == "RequestTooLargeError"
    assert "max_request_bytes=4194304" in error["message"]
    assert chat_calls(upstream) == before


@pytest.mark.usefixtures("upstream")
async def test_httpx_which_writes_the_whole_body_before_reading_gets_the_413(model: ChildServer) -> None:
    """The `openai` SDK's HTTP client, the same way (before: `RemoteProtocolError`/reset)."""
    async with httpx2.AsyncClient(timeout=60) as client:
        answer = await client.post(
            f"{model.url}/v1/responses",
            content=_oversized_body(),
            headers={"Content-Type": "application/json"},
        )
        assert answer.status_code == 413
        assert answer.json()["error"]["type"] == "RequestTooLargeError"
        again = await client.get(f"{model.url}/health")  # the connection (or a new one) still serves
        assert again.status_code == 200


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_a_streamed_300_mb_body_is_cut_at_the_limit_and_memory_stays_flat(
    model: ChildServer, upstream: StubProcess
) -> None:
    before_rss = peak_rss_mb(model.process.pid)
    before_calls = chat_calls(upstream)
    chunk = b"y" * MIB

    def chunks() -> Iterator[bytes]:
        yield b'{"input": "'
        for _ in range(300):
            yield chunk
        yield b'"}'

    host, port = model.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        connection.request(
            "POST",
            "/v1/responses",
            body=chunks(),
            encode_chunked=True,
            headers={"Content-Type": "application/json"},
        )
        answer = connection.getresponse()
        status, error = answer.status, json.loads(answer.read())["error"]
    finally:
        connection.close()

    assert status == 413
    assert error["type"] == "RequestTooLargeError"
    assert chat_calls(upstream) == before_calls
    # The body is 75x the limit; buffering it would add ~300 MB (the issue measured +1.2 GB).
    grown_mb = peak_rss_mb(model.process.pid) - before_rss
    print(f"peak RSS grew by {grown_mb:.1f} MB")
    assert grown_mb < 64
    status, _ = request(model, "GET", "/health")
    assert status == 200
