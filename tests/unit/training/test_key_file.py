"""Where `WeightsClient` sends the engines' key (issue 43, point 12 and the new user's localhost).

The key file is real (under a temporary NG_STATE_DIR), the head server a real uvicorn server on
loopback answering `/servers`; the key is sent only to the URL its live ng_run wrote beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ng_cli.errors import ConfigError
from ng_cli.launcher.admin_keys import key_file, stored_key, write_admin_keys
from ng_cli.model_server.admin_routes import ADMIN_ROUTES
from ng_cli.servers.testing import serve_in_thread
from ng_cli.training import WeightsClient
from ng_cli.training.client import _error_of
from tests.unit.training.test_client_errors import http_error


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NG_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("NG_WEIGHTS_KEY", raising=False)
    return tmp_path / "state"


def head_listing(model_url: str) -> Iterator[str]:
    async def servers(_request: Request) -> JSONResponse:
        return JSONResponse([{"name": "policy_model", "url": model_url, "admin": ADMIN_ROUTES}])

    with serve_in_thread(Starlette(routes=[Route("/servers", servers)])) as url:
        yield url


@pytest.fixture
def head() -> Iterator[str]:
    yield from head_listing("http://127.0.0.1:4242")


def test_localhost_and_127_0_0_1_name_the_same_head(head: str) -> None:
    write_admin_keys(head, {"policy_model": "k"}, {"policy_model": "http://127.0.0.1:4242"})
    port = head.rsplit(":", 1)[1]
    client = WeightsClient.connect(f"http://localhost:{port}/")
    assert (client.key, client.url) == ("k", "http://127.0.0.1:4242")


def test_a_key_file_left_by_a_killed_ng_run_is_ignored_and_removed(head: str) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = write_admin_keys(head, {"policy_model": "old-key"}, {"policy_model": "http://127.0.0.1:4242"})
    assert path is not None
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "pid": dead.pid}))
    with pytest.raises(ConfigError, match="no key for 'policy_model'") as refused:
        WeightsClient.connect(head)
    assert "NG_WEIGHTS_KEY" in (refused.value.hint or "")
    assert not path.exists()


def test_the_key_goes_only_to_the_url_its_ng_run_wrote() -> None:
    """A head on a reused port that lists another model server URL does not receive the key."""
    for head in head_listing("http://127.0.0.1:9999"):
        write_admin_keys(head, {"policy_model": "k"}, {"policy_model": "http://127.0.0.1:4242"})
        with pytest.raises(ConfigError, match="the key is not sent"):
            WeightsClient.connect(head)


def test_the_key_file_keeps_pid_and_urls(head: str) -> None:
    write_admin_keys(head, {"policy_model": "k"}, {"policy_model": "http://127.0.0.1:4242"})
    stored = stored_key(head, "policy_model")
    assert stored is not None
    assert (stored.pid, stored.url) == (os.getpid(), "http://127.0.0.1:4242")
    assert oct(key_file(head).stat().st_mode & 0o777) == "0o600"


def test_a_failed_rollback_keeps_its_engines_and_exit_code_3() -> None:
    envelope: dict[str, Any] = {
        "error": {
            "message": "ROLLBACK FAILED",
            "phase": "reload",
            "engine": "http://e:1",
            "rolled_back": False,
            "rollback_failed": {"http://e:1": "the checkpoint of version 1 is gone"},
            "version": 1,
        }
    }
    error = _error_of(http_error(409, envelope), "policy_model")
    assert error.rollback_failed == {"http://e:1": "the checkpoint of version 1 is gone"}  # type: ignore[attr-defined]
    assert error.exit_code == 3  # type: ignore[attr-defined]
