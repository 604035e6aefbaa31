"""vllm_model sends vLLM the chat body NeMo Gym 0.7.0's vllm_model sends, for every case of
`cases/vllm_model_chat.json`: the `nemo_gym` bodies come from NeMo Gym's own
`ResponsesConverter.responses_to_chat_completion_create_params` (nemo_gym/responses_converter.py)
and `VLLMModel._preprocess_chat_completion_create_params`
(responses_api_models/vllm_model/app.py), i.e. what its `create_chat_completion` posts.

Ours is the body a stub vLLM received from our vllm_model's `/v1/responses`, served over HTTP
with the case's config. The rules held here: function tools go without `strict` (NeMo Gym's
`_strip_hosted_only_tool_fields`: chat templates print unknown keys into the prompt), and with
vLLM's reasoning parser only the first reasoning text of an assistant turn goes back (NeMo Gym
sends `reasoning_matches[0]`).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.config.schema import validate_block
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import serve_in_thread
from tests.compat.case_files import load_cases
from tests.fixtures.stub_vllm import StubVllm

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "responses_api_models" / "vllm_model" / "app.py"
CASES = load_cases("vllm_model_chat")
KEPT_REASONING_CONTENT = "reasoning-content-not-summary-parser"
"""The one deliberate difference (docs/compat.md): a reasoning item's `content` (reasoning_text,
what vLLM's own Responses API and gpt-oss clients send) is sent back; NeMo Gym reads `summary`
only and drops it. Items NeMo Gym makes have no `content`, so its rollouts are not affected."""


@pytest.fixture(scope="module")
def stub() -> Iterator[tuple[StubVllm, str]]:
    engine = StubVllm()
    with serve_in_thread(engine.build_app()) as url:
        yield engine, url


def _chat_body_sent(stub: tuple[StubVllm, str], case: dict[str, Any]) -> dict[str, Any]:
    engine, url = stub
    block = {
        "base_url": f"{url}/v1",
        "api_key": engine.api_key,
        "model": engine.model,
        "return_token_id_information": False,
        "uses_reasoning_parser": False,
        **case["config"],
    }
    server_class = load_server_class(APP)
    server = server_class(validate_block(server_class.config_class, block=block), name="policy_model")
    with serve_in_thread(server.build_app()) as model_url:
        request = urllib.request.Request(
            f"{model_url}/v1/responses",
            data=orjson.dumps(case["request"]),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200
    return dict(engine.requests[-1])


AGREEING = [case for case in CASES if case["id"] != KEPT_REASONING_CONTENT]


@pytest.mark.parametrize("case", AGREEING, ids=[case["id"] for case in AGREEING])
def test_chat_body_agrees_with_nemo_gym(stub: tuple[StubVllm, str], case: dict[str, Any]) -> None:
    assert _chat_body_sent(stub, case) == case["nemo_gym"]["body"]


def test_reasoning_content_is_the_one_documented_difference(stub: tuple[StubVllm, str]) -> None:
    (case,) = [case for case in CASES if case["id"] == KEPT_REASONING_CONTENT]
    ours = _chat_body_sent(stub, case)
    assistant = ours["messages"][1]
    assert (assistant.pop("reasoning"), assistant.pop("reasoning_content")) == (
        "raw thoughts",
        "raw thoughts",
    )
    assert ours == case["nemo_gym"]["body"]


def test_chat_route_sends_function_tools_without_strict(stub: tuple[StubVllm, str]) -> None:
    """NeMo Gym's `/v1/chat/completions` runs the same `_preprocess_chat_completion_create_params`,
    so `strict` leaves a chat body's function tools there too; other tools pass as they are."""
    engine, url = stub
    (case,) = [case for case in CASES if case["id"] == "tool-strict-true"]
    tool = case["request"]["tools"][0]
    function = {key: tool[key] for key in ("name", "description", "parameters", "strict")}
    other = {"type": "custom", "custom": {"name": "grep"}}
    body = {
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [{"type": "function", "function": function}, other],
    }
    server_class = load_server_class(APP)
    block = {
        "base_url": f"{url}/v1",
        "api_key": engine.api_key,
        "model": engine.model,
        "return_token_id_information": False,
        "uses_reasoning_parser": False,
    }
    server = server_class(validate_block(server_class.config_class, block=block), name="policy_model")
    with serve_in_thread(server.build_app()) as model_url:
        request = urllib.request.Request(
            f"{model_url}/v1/chat/completions",
            data=orjson.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200
    sent = engine.requests[-1]
    assert sent["tools"] == [case["nemo_gym"]["body"]["tools"][0], other]
