"""vllm_model's start-up checks: wrong model, wrong key, unreachable endpoints, a late endpoint joining."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ng_cli.errors import ConfigError, LaunchError
from ng_cli.servers.spec import ServerSpec, write_spec
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.served_model import STUB_MODEL, make_model_server
from tests.fixtures.stub_vllm import StubProcess, StubVllm

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[1] / "app.py"
SECRET_KEY = "sk-do-not-print-me"


def make_server(base_url: str | list[str], **overrides: Any) -> Any:
    block = {
        "base_url": base_url,
        **STUB_MODEL,
        "health_probe_interval_s": 0.5,
        "connect_timeout_s": 1.0,
        "probe_timeout_s": 1.0,
        **overrides,
    }
    return make_model_server(APP, block)


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def stub_url() -> Iterator[str]:
    with serve_in_thread(StubVllm().build_app()) as url:
        yield url


async def test_a_model_the_endpoint_does_not_serve_names_what_it_serves() -> None:
    with serve_in_thread(StubVllm(model="Qwen/Qwen3-8B").build_app()) as url:
        server = make_server(f"{url}/v1")
        with pytest.raises(ConfigError) as caught:
            await server.upstream.start()
        await server.http.close()
    assert "'stub-model'" in caught.value.message
    assert "'Qwen/Qwen3-8B'" in caught.value.message


async def test_a_rejected_key_is_reported_without_the_key(stub_url: str) -> None:
    server = make_server(f"{stub_url}/v1", api_key=SECRET_KEY)
    with pytest.raises(ConfigError) as caught:
        await server.upstream.start()
    await server.http.close()
    assert "401" in caught.value.message
    assert "api_key" in caught.value.message
    assert SECRET_KEY not in caught.value.message + str(caught.value.hint)


async def test_no_reachable_endpoint_fails_the_start() -> None:
    dead = f"http://127.0.0.1:{unused_port()}/v1"
    server = make_server(dead)
    with pytest.raises(LaunchError) as caught:
        await server.upstream.start()
    await server.http.close()
    assert dead in caught.value.message
    assert "curl" in str(caught.value.hint)


async def test_one_good_endpoint_is_enough_and_a_late_one_joins(stub_url: str) -> None:
    port = unused_port()
    late = f"http://127.0.0.1:{port}/v1"
    server = make_server([f"{stub_url}/v1", late])
    await server.upstream.start()
    try:
        good, missing = server.upstream.pool.endpoints
        assert good.is_healthy
        assert not missing.is_healthy
        with StubProcess(port=port):
            for _ in range(100):
                if missing.is_healthy:
                    break
                await asyncio.sleep(0.05)
            assert missing.is_healthy
    finally:
        await server.upstream.stop()
        await server.http.close()


def test_the_child_process_exits_with_a_readable_error(tmp_path: Path) -> None:
    """The real entry point: a misconfigured model makes the child exit non-zero, key not shown."""
    with serve_in_thread(StubVllm(model="served-model", api_key=None).build_app()) as url:
        spec = ServerSpec(
            name="policy_model",
            server_type="responses_api_models",
            implementation="vllm_model",
            app_path=str(APP),
            config={
                "base_url": f"{url}/v1",
                "api_key": SECRET_KEY,
                "model": "stub-model",
                "return_token_id_information": False,
                "uses_reasoning_parser": False,
            },
            port=unused_port(),
            session_secret="s",
        )
        spec_path = tmp_path / "spec.json"
        write_spec(spec, spec_path)
        result = subprocess.run(
            [sys.executable, "-m", "ng_cli.servers.child", str(spec_path)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            check=False,
        )
    assert result.returncode == 2  # ConfigError's exit code, not uvicorn's generic failure
    assert "Traceback" not in result.stderr
    assert "does not serve model 'stub-model'" in result.stderr
    assert "'served-model'" in result.stderr
    assert SECRET_KEY not in result.stderr + result.stdout
