"""`nemo_gym.responses_converter`: NeMo Gym's Responses <-> Chat Completions converter, over ours.

`ResponsesConverter.responses_to_chat_completion_create_params` is `ng_cli.conversion`'s
`to_chat_request`, the rule vllm_model sends to vLLM (held to NeMo Gym's own converter by
`tests/compat/test_vllm_model_chat.py`), returned as NeMo Gym's chat params model. Servers and
tests use this direction to see what a model receives; the reverse direction (chat completions
to Responses output items) is served by vllm_model itself and not stood in for here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ng_cli.conversion import to_chat_request
from ng_cli.nemo_gym_compat.api.openai_utils import (
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymResponseCreateParamsNonStreaming,
)
from ng_cli.protocol import ResponsesRequest

__all__ = ["ResponsesConverter"]


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
