"""`nemo_gym.base_responses_api_model.SimpleResponsesAPIModel`: NeMo Gym's model-server base, as
their own tests build one (gdpval's judge panel serves `openai_model` proxies in a TestClient)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from omegaconf import OmegaConf
from pydantic import Field

from ng_cli.errors import ConfigError
from ng_cli.nemo_gym_compat.api.base_responses_api_model import (
    BaseResponsesAPIModelConfig,
    SimpleResponsesAPIModel,
)
from ng_cli.nemo_gym_compat.api.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)
from ng_cli.nemo_gym_compat.api.server_utils import ServerClient


class _Echo(SimpleResponsesAPIModel):
    seen: list[dict[str, Any]] = Field(default_factory=list)  # a field, as NeMo Gym servers keep state

    async def chat_completions(
        self, body: NeMoGymChatCompletionCreateParamsNonStreaming
    ) -> NeMoGymChatCompletion:
        self.seen.append(body.model_dump(exclude_unset=True))
        text = str(body.messages[-1]["content"]).upper()
        return NeMoGymChatCompletion.model_validate(
            {"id": "c1", "object": "chat.completion", "created": 0, "model": body.model or "m",
             "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}
        )  # fmt: skip

    async def responses(self, body: NeMoGymResponseCreateParamsNonStreaming) -> NeMoGymResponse:
        raise NotImplementedError


def _server() -> _Echo:
    config = BaseResponsesAPIModelConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="judge")
    return _Echo(
        config=config, server_client=ServerClient.model_construct(global_config_dict=OmegaConf.create({}))
    )


def test_a_subclass_serves_its_chat_completions_with_bodies_validated() -> None:
    server = _server()
    with TestClient(server.setup_webserver()) as client:
        answer = client.post(
            "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] == "HI"
        assert server.seen[-1]["model"] == "m"
        assert client.post("/v1/chat/completions", json={"model": "m"}).status_code == 422  # no messages
        assert client.post("/v1/messages", json={}).status_code == 404  # Anthropic's route: not offered


def test_ng_run_does_not_serve_nemo_gyms_model_servers() -> None:
    with pytest.raises(ConfigError, match="NeMo Gym model server"):
        _Echo.__ng_server_class__()
