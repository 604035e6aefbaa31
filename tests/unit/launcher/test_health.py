"""Readiness polling against real loopback sockets: ready, dead, late, interrupted.

The servers here are tiny stdlib HTTP servers on sockets bound the launcher's way; they use
loopback sockets and threads, hence the integration marker.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ng_cli.errors import LaunchError
from ng_cli.launcher.health import (
    ExitedBeforeReadyError,
    NotReadyError,
    Target,
    wait_until_ready,
)
from ng_cli.launcher.ports import bind_listener
from ng_cli.servers.readiness import probe_health

pytestmark = pytest.mark.integration


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


class LateServer:
    """Serves /health on an already-bound socket, starting after `delay_s`."""

    def __init__(self, sock: socket.socket, delay_s: float) -> None:
        self.server = HTTPServer(sock.getsockname(), _Health, bind_and_activate=False)
        self.server.socket.close()
        self.server.socket = sock
        self.serving = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(delay_s,), daemon=True)
        self.thread.start()

    def _run(self, delay_s: float) -> None:
        time.sleep(delay_s)
        self.serving.set()
        self.server.serve_forever(poll_interval=0.01)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = bind_listener("127.0.0.1", 0, owner="test")
    yield sock
    sock.close()


def url_of(sock: socket.socket) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def alive() -> None:
    return None


def test_ready_as_soon_as_the_server_accepts(listener: socket.socket) -> None:
    server = LateServer(listener, delay_s=0.3)
    try:
        seen: list[str] = []
        ready = wait_until_ready(
            {"a": Target("a", url_of(listener), alive)},
            timeout_s=60,
            on_ready=lambda name, _s: seen.append(name),
        )
        served_before_ready = server.serving.is_set()  # ready only once it answered, not before
    finally:
        server.close()
    assert seen == ["a"]
    assert served_before_ready
    assert ready["a"] < 30  # at the answer, not at the 60 s deadline


def test_a_process_that_exits_fails_the_wait_at_once(listener: socket.socket) -> None:
    started = time.monotonic()
    with pytest.raises(ExitedBeforeReadyError) as caught:
        wait_until_ready({"b": Target("b", url_of(listener), lambda: 3)}, timeout_s=30)
    assert time.monotonic() - started < 15  # not the 30 s deadline
    assert (caught.value.name, caught.value.exit_code) == ("b", 3)


def test_deadline_names_the_server_and_the_knob(listener: socket.socket) -> None:
    started = time.monotonic()
    with pytest.raises(NotReadyError) as caught:
        wait_until_ready({"slow": Target("slow", url_of(listener), alive)}, timeout_s=0.4)
    assert 0.4 <= time.monotonic() - started < 15  # the 0.4 s deadline, not never
    assert "'slow'" in caught.value.message
    assert "/health" in caught.value.message
    assert caught.value.hint is not None
    assert "ready_timeout_s" in caught.value.hint


def test_refused_connections_are_retried_until_the_server_binds() -> None:
    probe = bind_listener("127.0.0.1", 0, owner="probe")
    port = probe.getsockname()[1]
    probe.close()  # nothing listens now: connections are refused
    holder: list[LateServer] = []

    def bind_later() -> None:
        time.sleep(0.2)
        holder.append(LateServer(bind_listener("127.0.0.1", port, owner="late"), delay_s=0))

    binder = threading.Thread(target=bind_later)
    binder.start()
    try:
        ready = wait_until_ready({"c": Target("c", f"http://127.0.0.1:{port}", alive)}, timeout_s=10)
    finally:
        binder.join()
        for server in holder:
            server.close()
    assert 0.2 <= ready["c"] < 5


def test_a_stop_request_ends_the_wait(listener: socket.socket) -> None:
    started = time.monotonic()
    with pytest.raises(LaunchError, match="interrupted"):
        wait_until_ready(
            {"d": Target("d", url_of(listener), alive)},
            timeout_s=30,
            should_stop=lambda: time.monotonic() - started > 0.2,
        )
    assert time.monotonic() - started < 15  # not the 30 s deadline


def test_probe_health_is_false_for_errors_and_silence(listener: socket.socket) -> None:
    assert not probe_health(url_of(listener), timeout_s=0.1)  # accepted, never answered
    server = LateServer(listener, delay_s=0)
    try:
        assert probe_health(url_of(listener), timeout_s=2)
    finally:
        server.close()
