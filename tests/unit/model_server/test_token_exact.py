"""The /v1/completions side of token_exact: the body sent, the answer read back, the refusals,
and the config keys (vllm_model's `token_exact`, `tokenizer_path`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ng_cli.config.schema import validate_block
from ng_cli.conversion import to_response
from ng_cli.conversion.tool_calls import TOOL_CALL_PARSERS
from ng_cli.errors import BadRequestError, ConfigError
from ng_cli.model_server.token_exact import _parses_tools, completion_body, to_chat_completion
from ng_cli.protocol.responses import ResponsesRequest
from ng_cli.servers.loading import load_server_class
from ng_cli.tokens.contract import TokenContractError
from ng_cli.upstream.config import VllmModelConfig
from tests.fixtures.tokens.tokenizer_dirs import NO_END_OF_TURN_TEMPLATE, build_tiny_tokenizer, with_template

APP = Path(__file__).resolve().parents[3] / "responses_api_models" / "vllm_model" / "app.py"

CHAT: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "tools": [{"type": "function", "function": {"name": "get_weather"}}],
    "temperature": 0.7,
    "top_p": 0.9,
    "seed": 5,
    "structured_outputs": {"regex": "a|b"},
    "logprobs": True,
    "top_logprobs": 0,
    "return_token_ids": True,
    "return_tokens_as_token_ids": True,
    "chat_template_kwargs": {"x": 1},
}


def answer(text: str, *, ids: list[int], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "text": text,
                "finish_reason": finish,
                "token_ids": ids,
                "prompt_token_ids": [1, 2, 3],
                "logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": [-0.25] * len(ids)},
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": len(ids), "total_tokens": 3 + len(ids)},
    }


def test_sampling_fields_pass_through_and_chat_only_fields_do_not() -> None:
    body = completion_body(CHAT, [1, 2, 3], keeps_special_tokens=True)
    assert body == {
        "model": "m",
        "prompt": [1, 2, 3],
        "temperature": 0.7,
        "top_p": 0.9,
        "seed": 5,
        "structured_outputs": {"regex": "a|b"},
        "max_tokens": None,
        "logprobs": 0,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        "skip_special_tokens": False,
    }
    assert completion_body({**CHAT, "max_tokens": 64}, [1], keeps_special_tokens=False)["max_tokens"] == 64


@pytest.mark.parametrize(("choice", "parses"), [(None, True), ("auto", True), ("none", False)])
def test_tool_calls_are_parsed_when_vllm_would(choice: str | None, parses: bool) -> None:
    assert _parses_tools({**CHAT, "tool_choice": choice}) is parses
    assert _parses_tools({"messages": []}) is False


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_tool_choice_is_refused(choice: Any) -> None:
    with pytest.raises(BadRequestError, match="not supported with token_exact"):
        _parses_tools({**CHAT, "tool_choice": choice})


def test_the_answer_becomes_the_same_responses_items_and_token_fields() -> None:
    text = 'Checking.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    chat = to_chat_completion(
        answer(text, ids=[7, 8, 9]), prompt_token_ids=[1, 2, 3], parser=TOOL_CALL_PARSERS["hermes"]
    )
    assert chat["choices"][0]["finish_reason"] == "tool_calls"
    request = ResponsesRequest.model_validate({"input": "hi"})
    response = to_response(
        chat, request=request, model="m", uses_reasoning_parser=False, wants_token_ids=True
    )
    kinds = [item["type"] for item in response["output"]]
    assert kinds == ["message", "function_call"]
    assert response["output"][0]["content"][0]["text"] == "Checking."
    call = response["output"][1]
    assert (call["name"], call["arguments"]) == ("get_weather", '{"city": "Paris"}')
    assert call["prompt_token_ids"] == [1, 2, 3]
    assert call["generation_token_ids"] == [7, 8, 9]
    assert call["generation_log_probs"] == [-0.25] * 3
    assert response["usage"]["output_tokens"] == 3


def test_a_prompt_echo_that_differs_is_a_contract_error() -> None:
    with pytest.raises(TokenContractError, match="differ from the token prompt"):
        to_chat_completion(answer("x", ids=[4]), prompt_token_ids=[1, 2], parser=None)


def block(**keys: Any) -> dict[str, Any]:
    return {
        "base_url": "http://127.0.0.1:8000/v1",
        "api_key": "k",
        "model": "m",
        "return_token_id_information": True,
        "uses_reasoning_parser": False,
        **keys,
    }


def test_token_exact_config(tmp_path: Path) -> None:
    directory = build_tiny_tokenizer(tmp_path / "tok")
    config = validate_block(VllmModelConfig, block(token_exact=True, tokenizer_path=str(directory)))
    assert config.wants_token_exact()
    assert config.tokenizer_dir() == directory.resolve()
    assert validate_block(
        VllmModelConfig, block(token_exact="auto", model=str(directory))
    ).wants_token_exact()
    assert not validate_block(VllmModelConfig, block(token_exact="auto")).wants_token_exact()  # no tokenizer
    with pytest.raises(ConfigError, match="token_exact: true needs the model's tokenizer, but model 'm'"):
        validate_block(VllmModelConfig, block(token_exact=True))
    with pytest.raises(ConfigError, match="needs return_token_id_information: true"):
        validate_block(
            VllmModelConfig,
            block(token_exact=True, tokenizer_path=str(directory), return_token_id_information=False),
        )


def test_token_ids_without_log_probs_config(tmp_path: Path) -> None:
    """`return_generation_log_probs: false` needs vLLM's own ids; token_exact (which reads the
    completions logprobs) is refused when asked for and stays off on "auto"."""
    directory = build_tiny_tokenizer(tmp_path / "tok")
    off = {"return_generation_log_probs": False}
    assert not validate_block(
        VllmModelConfig, block(token_exact="auto", model=str(directory), **off)
    ).wants_token_exact()
    with pytest.raises(ConfigError, match="cannot run with return_generation_log_probs: false"):
        validate_block(VllmModelConfig, block(token_exact=True, tokenizer_path=str(directory), **off))
    with pytest.raises(ConfigError, match="needs vLLM's own token ids"):
        validate_block(VllmModelConfig, block(token_id_source="tokenize", **off))
    with pytest.raises(ConfigError, match="needs vLLM's own token ids"):
        validate_block(VllmModelConfig, block(request_prompt_and_generation_token_ids=False, **off))


def make_server(tmp_path: Path, template: str | None = None, **keys: Any) -> Any:
    directory = build_tiny_tokenizer(tmp_path / "tok")
    if template is not None:
        directory = with_template(directory, tmp_path / "other", template)
    server_class = load_server_class(APP)
    config = validate_block(
        server_class.config_class, block(token_exact=True, tokenizer_path=str(directory), **keys)
    )
    return server_class(config, name="policy_model")


def test_the_server_loads_the_tokenizer_once_at_start(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    assert server.vllm.token_exact is not None
    assert server.vllm.token_exact.tokenizer.end_of_turn_text == "<|im_end|>"


def test_a_template_without_end_of_turn_stops_the_server_with_its_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        make_server(tmp_path, NO_END_OF_TURN_TEMPLATE)
    assert caught.value.message.startswith("'policy_model': token_exact: ")
    assert "does not close an assistant turn" in caught.value.message
