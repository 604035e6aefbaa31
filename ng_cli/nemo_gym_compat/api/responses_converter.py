"""`nemo_gym.responses_converter`: NeMo Gym's Responses <-> Chat Completions converter, over ours.

`ResponsesConverter.responses_to_chat_completion_create_params` is `ng_cli.conversion`'s
`to_chat_request`, the rule vllm_model sends to vLLM (held to NeMo Gym's own converter by
`tests/compat/test_vllm_model_chat.py`), returned as NeMo Gym's chat params model. Servers and
tests use this direction to see what a model receives; the reverse direction (chat completions
to Responses output items) is served by vllm_model itself and not stood in for here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from ng_cli.conversion import to_chat_request
from ng_cli.nemo_gym_compat.api.openai_utils import (
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymResponseCreateParamsNonStreaming,
)
from ng_cli.protocol import ResponsesRequest

__all__ = ["ResponsesConverter", "split_responses_input_output_items"]


class ResponsesConverter(BaseModel):
    return_token_id_information: bool = False
    """Ask vLLM for token ids too (`return_token_ids`), as vllm_model does for training."""

    def responses_to_chat_completion_create_params(
        self, params: NeMoGymResponseCreateParamsNonStreaming | dict[str, Any]
    ) -> NeMoGymChatCompletionCreateParamsNonStreaming:
        """The chat request vllm_model would send for `params`; a Responses body with no model
        keeps its model unset."""
        body = params.model_dump(exclude_unset=True) if isinstance(params, BaseModel) else dict(params)
        model = str(body.get("model") or "")
        chat = to_chat_request(
            ResponsesRequest.model_validate(body),
            model=model,
            wants_token_ids=self.return_token_id_information,
        )
        if not model:
            chat.pop("model", None)
        return NeMoGymChatCompletionCreateParamsNonStreaming.model_validate(chat)


_OUTPUT_BOUNDARY_TYPES = frozenset(
    {
        "code_interpreter_call", "computer_call", "custom_tool_call", "file_search_call",
        "function_call", "image_generation_call", "local_shell_call", "mcp_approval_request",
        "mcp_call", "mcp_list_tools", "reasoning", "web_search_call", "apply_patch_call", "shell_call",
        "tool_search_call",
    }
)  # fmt: skip
"""Item types only a model produces: the first one (or an assistant message) starts its output."""
Item = TypeVar("Item")


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def split_responses_input_output_items(items: Sequence[Item]) -> tuple[list[Item], list[Item]]:
    """A conversation's items split where the model's part begins (NeMo Gym's rule): at the
    first assistant message or model-produced item; all input when there is none."""
    for index, item in enumerate(items):
        kind = _field(item, "type")
        if (kind == "message" and _field(item, "role") == "assistant") or kind in _OUTPUT_BOUNDARY_TYPES:
            return list(items[:index]), list(items[index:])
    return list(items), []
