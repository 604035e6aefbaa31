"""local_vllm_model's server over real sockets (stub vLLM): with a base_url it is vllm_model; a timed-out
sample names NRL_VLLM_ASYNC_TIMEOUT_SECONDS with the export line that doubles it. The engines
themselves (planned, started, restarted by ng_run) are tested in tests/engine/test_local_vllm_model.py."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ng_cli.config.schema import validate_block
from ng_cli.errors import ConfigError
from ng_cli.servers.loading import load_server_class
from tests.fixtures.served_model import STUB_MODEL, serve_model_server
from tests.fixtures.stub_vllm import StubVllm

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[1] / "app.py"


def block(**overrides: Any) -> dict[str, Any]:
    return {
        **STUB_MODEL,
        "vllm_serve_kwargs": {"tensor_parallel_size": 8},  # NeMo Gym's keys, unused with a base_url
        "hf_home": "/nowhere",
        "max_attempts": 1,
        **overrides,
    }


def serve(config_block: dict[str, Any]) -> AbstractContextManager[str]:
    return serve_model_server(APP, config_block)


async def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as answer:
        return answer.status, await answer.json()


async def test_with_a_base_url_it_is_vllm_model(stub_url: str) -> None:
    with serve(block(base_url=f"{stub_url}/v1")) as url:
        status, body = await post(f"{url}/v1/responses", {"input": "weather in Paris?"})

    assert status == 200
    assert body["object"] == "response"
    assert body["output"][-1]["type"] == "message"


async def test_a_timed_out_sample_names_the_env_var_and_the_doubled_export(
    stub: StubVllm, stub_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NRL_VLLM_ASYNC_TIMEOUT_SECONDS", "1")
    stub.fault = "hang"
    with serve(block(base_url=f"{stub_url}/v1", connect_timeout_s=1)) as url:
        status, body = await post(f"{url}/v1/responses", {"input": "hi"})

    assert status == 504
    error = body["error"]
    assert "vLLM async generation timed out: no sample within 1 s" in error["message"]
    assert "export NRL_VLLM_ASYNC_TIMEOUT_SECONDS=2" in str(error)


def test_without_base_url_or_engines_it_refuses_to_start() -> None:
    server_class = load_server_class(APP)
    config = validate_block(server_class.config_class, block=block())
    with pytest.raises(ConfigError, match="no base_url and no engines"):
        server_class(config, name="policy_model")
