"""Ctrl-C on `ng_update_weights` while the model server holds its update call open: exit 130 at
once, one line saying what becomes of the update, no traceback.

Before, started with SIGINT ignored (a script's `ng_update_weights ... &`, a background test run),
the command waited for the update's answer: exit 0 once it ended, or a hang for as long as the
server held the call. A plain HTTP server on loopback stands in for the head server and the model
server; its update route never answers until the test is done.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal

import pytest

from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.sigint import interrupted, interrupted_line, with_sigint
from tests.fixtures.stack_process import console_script

pytestmark = pytest.mark.integration


class SilentServer(ThreadingHTTPServer):
    """A head server listing one updatable model server (itself) whose update never answers."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.update_arrived = threading.Event()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: SilentServer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the command's output, not the server's."""

    def do_GET(self) -> None:
        body = json.dumps([{"name": "policy_model", "url": self.server.url, "admin": {}}]).encode()
        self.send_response(200 if self.path == "/servers" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.server.update_arrived.set()
        self.server.release.wait(HANG_CAP_S)  # held open: the answer never comes while the test runs


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


@pytest.mark.usefixtures("empty_workdir")
@pytest.mark.parametrize("disposition", ["SIG_DFL", "SIG_IGN"])
def test_ctrl_c_while_the_update_is_held_exits_130_at_once(
    disposition: Literal["SIG_DFL", "SIG_IGN"], silent: SilentServer, tmp_path: Path
) -> None:
    env = {**os.environ, "NG_WEIGHTS_KEY": "k", "NG_STATE_DIR": str(tmp_path / "state")}
    argv = [str(console_script("ng_update_weights")), "+path=/ckpt/step-3", "+version=3"]
    code, out = interrupted(
        with_sigint(disposition, [*argv, f"+head_server_url={silent.url}"]),
        lambda: (
            silent.update_arrived.wait(HANG_CAP_S) or pytest.fail("the update call never reached the server")
        ),
        env=env,
    )
    assert code == 130, out  # before: the ignored SIGINT never returned
    assert out.strip().splitlines() == [interrupted_line(3)], out
