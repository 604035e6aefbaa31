"""The agent-side and sandbox stand-ins' pure parts: typed neighbour failures, provider refusals,
usage sums, and the sandbox program a command becomes (run by test_nemo_gym_sandbox.py). Here, not
in tests/unit: the local provider builds a real `PythonSandbox` (its interpreter and cgroup)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from ng_cli.errors import UpstreamHTTPError, UpstreamTimeoutError, UpstreamUnavailableError
from ng_cli.nemo_gym_compat.agent_adapter import typed_failure
from ng_cli.nemo_gym_compat.api.openai_utils import NeMoGymResponseUsage, accumulate_response_usage
from ng_cli.nemo_gym_compat.api.sandbox import (
    AsyncSandbox,
    SandboxSpec,
    UnavailableProviderError,
    unavailable_provider,
)
from ng_cli.nemo_gym_compat.api.sandbox.config import resolve_provider_config, resolve_provider_metadata
from ng_cli.servers.answers import status_for

pytestmark = pytest.mark.integration


def _response_error(status: int, body: bytes) -> aiohttp.ClientResponseError:
    info = aiohttp.RequestInfo(URL("http://127.0.0.1:9/verify"), "POST", CIMultiDictProxy(CIMultiDict()))
    error = aiohttp.ClientResponseError(info, (), status=status, message="Internal Server Error")
    error.response_content = body  # type: ignore[attr-defined]
    return error


def test_a_neighbours_error_status_is_typed_with_its_url_and_body() -> None:
    typed = typed_failure(_response_error(500, b'{"error": "test_data missing"}'), server="scicode_agent")
    assert isinstance(typed, UpstreamHTTPError)
    assert status_for(typed) == 502
    assert "POST http://127.0.0.1:9/verify answered 500" in typed.message
    assert "test_data missing" in typed.message
    assert status_for(typed_failure(_response_error(422, b""), server="a")) == 422  # a 4xx is kept


def test_no_connection_and_timeouts_are_typed() -> None:
    refused = aiohttp.ClientConnectionError("Connection refused")
    assert isinstance(typed_failure(refused, server="a"), UpstreamUnavailableError)
    assert status_for(typed_failure(refused, server="a")) == 503
    assert isinstance(typed_failure(TimeoutError(), server="a"), UpstreamTimeoutError)


@pytest.mark.parametrize("name", ["docker", "e2b", "opensandbox", "daytona", "some_plugin"])
def test_providers_we_cannot_have_are_named(name: str) -> None:
    problem = unavailable_provider({name: {}, "default_metadata": {"a": "b"}})
    assert problem is not None
    assert f"{name!r} is not available here" in problem
    with pytest.raises(UnavailableProviderError, match=name):
        AsyncSandbox({name: {}})


def test_local_is_available_and_a_named_block_must_be_inline() -> None:
    assert unavailable_provider({"local": {}}) is None
    assert resolve_provider_config({"local": {}, "default_metadata": {"k": "v"}}) == {"local": {}}
    assert resolve_provider_metadata({"local": {}, "default_metadata": {"k": 1}}) == {"k": "1"}
    with pytest.raises(ValueError, match="write the provider inline"):
        resolve_provider_config("sandbox", {})
    with pytest.raises(ValueError, match="exactly one provider"):
        resolve_provider_config({"local": {}, "docker": {}})


def test_unknown_local_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown keys for the local sandbox provider: gpus"):
        AsyncSandbox({"local": {"gpus": 1}})


def test_commands_become_python_programs_or_are_refused() -> None:
    async def program(command: str) -> str:
        sandbox = await AsyncSandbox({"local": {}}, SandboxSpec(files={"/tmp/a.py": "print(1)"})).start()
        return sandbox._program(command, "/tmp", {"X": "1"})

    text = asyncio.run(program("python3 /tmp/a.py arg"))
    assert "['/tmp/a.py', 'arg']" in text
    assert "{'X': '1'}" in text
    assert "'print(1)'" in text
    with pytest.raises(ValueError, match="runs Python programs only"):
        asyncio.run(program("bash -c 'ls'"))
    with pytest.raises(ValueError, match=r"no file '/tmp/b\.py' was put in the sandbox"):
        asyncio.run(program("python3 /tmp/b.py"))
    with pytest.raises(ValueError, match="only paths under /tmp/ and /sandbox/"):
        asyncio.run(AsyncSandbox({"local": {}}, SandboxSpec(files={"/etc/x": ""})).start())


def test_usage_sums_keep_unknown_counts_unknown() -> None:
    one = NeMoGymResponseUsage(input_tokens=3, output_tokens=2, total_tokens=5)
    assert NeMoGymResponseUsage.sum_from_list([one, one]).total_tokens == 10
    unknown = NeMoGymResponseUsage(input_tokens=None, output_tokens=1, total_tokens=None)
    summed = accumulate_response_usage(one, unknown)
    assert summed is not None
    assert summed.output_tokens == 3
    assert summed.input_tokens is None
    assert summed.total_tokens is None


def test_a_dataset_prompt_config_is_accepted_only_when_null() -> None:
    """NeMo Gym's configs write `prompt_config: null` (scicode's); a set one is not applied at
    collection here, so it is refused naming the command that applies it."""
    from ng_cli.config.schema import DatasetConfig

    row = {"name": "example", "type": "example", "jsonl_fpath": "data/example.jsonl"}
    assert DatasetConfig.model_validate({**row, "prompt_config": None}).prompt_config is None
    with pytest.raises(ValueError, match="ng_materialize_prompts"):
        DatasetConfig.model_validate({**row, "prompt_config": "benchmarks/x/prompts/default.yaml"})


def test_split_at_the_first_model_produced_item() -> None:
    from ng_cli.nemo_gym_compat.api.responses_converter import split_responses_input_output_items

    user = {"type": "message", "role": "user", "content": "hi"}
    tool_result = {"type": "function_call_output", "call_id": "c", "output": "1"}
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    answer = {"type": "message", "role": "assistant", "content": "ok"}
    assert split_responses_input_output_items([user, tool_result, call, answer]) == (
        [user, tool_result],
        [call, answer],
    )
    assert split_responses_input_output_items([user, answer]) == ([user], [answer])
    assert split_responses_input_output_items([user]) == ([user], [])
