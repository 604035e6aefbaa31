"""The total of request bodies a server holds at once (`max_request_bytes_in_flight`), measured.

vllm_model runs as its own process, started as ng_run starts it, over the stub vLLM in another
process whose chat answers a context overflow at once (a 31 MB prompt overflows any model):
what is measured is the model server's own peak RSS (VmHWM) while 16 clients send 31 MB each.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ng_cli.servers.testing import ChildServer, serve_in_child
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "responses_api_models" / "vllm_model" / "app.py"
MIB = 1024 * 1024
MB = 1000 * 1000


def _block(upstream: StubProcess, **keys: Any) -> dict[str, Any]:
    return {"base_url": upstream.base_url, "api_key": "stub-key", "model": "stub-model",
            "return_token_id_information": False, "uses_reasoning_parser": False, **keys}  # fmt: skip


def _set_fault(upstream: StubProcess, **fault: Any) -> None:
    call = urllib.request.Request(
        f"{upstream.root_url}/_stub/fault",
        data=json.dumps(fault).encode(),
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(call, timeout=10).read()


def _chat_calls(upstream: StubProcess) -> int:
    with urllib.request.urlopen(f"{upstream.root_url}/_stub/stats", timeout=10) as answer:
        return int(json.loads(answer.read())["calls"]["chat"])


def _until(condition: Callable[[], bool], timeout_s: float = HANG_CAP_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _post(server: ChildServer, body: bytes, results: list[Any]) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=300)
    try:
        connection.request("POST", "/v1/responses", body=body, headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        results.append((answer.status, json.loads(answer.read())))
    except OSError as error:
        results.append(error)
    finally:
        connection.close()


@pytest.fixture
def upstream() -> Iterator[StubProcess]:
    with StubProcess() as stub:
        yield stub


def test_sixteen_31_mb_bodies_at_once_stay_within_the_in_flight_total(
    upstream: StubProcess, tmp_path: Path
) -> None:
    """Before: all 16 were read and parsed at once, peak RSS +1.9 GB (the issue measured 2.1 GB).
    With 64 MiB in flight, two at a time: every one is still answered, the peak is a few hundred MB."""
    _set_fault(upstream, fault="overflow")
    block = _block(upstream, max_request_bytes_in_flight=64 * MIB)
    with serve_in_child(APP, block, name="policy_model", spec_dir=tmp_path) as server:
        before_mb = _peak_rss_mb(server.process.pid)
        body = json.dumps({"input": "y" * (31 * MB)}).encode()
        results: list[Any] = []
        clients = [threading.Thread(target=_post, args=(server, body, results)) for _ in range(16)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        grown_mb = _peak_rss_mb(server.process.pid) - before_mb

    print(f"16 x 31 MB bodies: peak RSS grew by {grown_mb:.0f} MB")
    assert [status for status, _ in results] == [200] * 16, results[:3]
    assert all(answer["status"] == "incomplete" for _, answer in results)  # the overflow answer
    assert grown_mb < 600


def test_a_body_that_finds_no_room_in_time_is_a_503_and_a_gone_client_frees_its_room(
    upstream: StubProcess, tmp_path: Path
) -> None:
    _set_fault(upstream, fault="hang", times=1)  # the first chat call never answers
    block = _block(upstream, max_request_bytes=MIB, max_request_bytes_in_flight=MIB, request_bytes_wait_s=1)
    body = json.dumps({"input": "y" * (600 * 1000)}).encode()  # two of them do not fit one MiB
    with serve_in_child(APP, block, name="policy_model", spec_dir=tmp_path) as server:
        host, port = server.url.removeprefix("http://").split(":")
        holder = http.client.HTTPConnection(host, int(port), timeout=60)
        holder.request("POST", "/v1/responses", body=body, headers={"Content-Type": "application/json"})
        _until(lambda: _chat_calls(upstream) == 1)  # the first body is in, its call upstream hangs

        call = urllib.request.Request(
            f"{server.url}/v1/responses", data=body, headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as info:  # urllib writes it all before it reads
            urllib.request.urlopen(call, timeout=60)
        with urllib.request.urlopen(f"{server.url}/health", timeout=10) as health:  # no body: no wait
            assert health.status == 200

        holder.close()  # the client goes away: its handler is cancelled and its bytes go back
        results: list[Any] = []
        _post(server, body, results)  # waits (up to 1 s) for that room

    assert info.value.code == 503
    assert info.value.headers["Retry-After"] == "1"
    error = json.loads(info.value.read())["error"]
    assert error["type"] == "ServerBusyError"
    assert f"max_request_bytes_in_flight={MIB}" in error["message"]
    assert "request_bytes_wait_s=1" in error["message"]
    assert results[0][0] == 200, results
