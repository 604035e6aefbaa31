"""vllm_model: the Responses API (and Chat Completions) over one or more vLLM servers.

A router only: the routes are `ng_cli.model_server.vllm_server.VllmModelServer`, conversion lives in
`ng_cli.conversion`, token ids in `ng_cli.tokens`, and endpoint choice, health, failover and
metrics in `ng_cli.upstream`. See docs/vllm_model.md.
"""

from __future__ import annotations

from typing import ClassVar

from ng_cli.model_server.vllm_server import VllmModelServer
from ng_cli.upstream import VllmModelConfig


class VllmModel(VllmModelServer[VllmModelConfig]):
    """`POST /v1/responses`, `POST /v1/chat/completions`, `GET /metrics`."""

    config_class: ClassVar[type[VllmModelConfig]] = VllmModelConfig
