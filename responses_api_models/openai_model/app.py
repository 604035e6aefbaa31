"""openai_model: `/v1/responses` and `/v1/chat/completions` passed through to an OpenAI-compatible API.

The body is forwarded unchanged except `model`, which the config sets. Endpoint choice, retries,
timeouts, health and metrics are the same as vllm_model's (`ng_cli.upstream`); a context
overflow is answered as the upstream's 400 and counted. `stream: true` relays the upstream's
events as they come (`ng_cli.model_server.relay`).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.responses import Response

from ng_cli.errors import ContextOverflowError, InvalidOutputError
from ng_cli.model_server.relay import open_relay
from ng_cli.servers import JSONResponse, ModelServer, read_generation_request, session_id
from ng_cli.servers.app import event_stream
from ng_cli.upstream import OpenAIModelConfig, Upstream, install_metrics_route, models_probe


class OpenAIModel(ModelServer[OpenAIModelConfig]):
    """`POST /v1/responses`, `POST /v1/chat/completions`, `GET /metrics`."""

    config_class: ClassVar[type[OpenAIModelConfig]] = OpenAIModelConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.upstream = Upstream(
            self.config,
            self.http,
            server=self.name,
            probe_url=models_probe,
            require_model=self.config.check_model_at_startup,
        )

    async def on_startup(self) -> None:
        await self.upstream.start()  # an NgError here ends the process with its message

    async def on_shutdown(self) -> None:
        await self.upstream.stop()

    def upstream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request as the upstream gets it: config's extra_body under it, the configured model."""
        body = {**(self.config.extra_body or {}), **body, "model": self.config.model}
        if self.config.drop_input_reasoning_items and isinstance(body.get("input"), list):
            body["input"] = [
                item
                for item in body["input"]
                if not (isinstance(item, dict) and item.get("type") == "reasoning")
            ]
        return body

    async def forward(self, path: str, body: dict[str, Any], *, session: str) -> dict[str, Any]:
        """POST `body` (see `upstream_body`) to `<base_url><path>`; the answer as is."""
        body = self.upstream_body(body)
        try:
            answer = await self.upstream.client.post(path, body, session_id=session)
        except ContextOverflowError:
            self.upstream.metrics.context_overflows.inc()
            raise
        if not isinstance(answer, dict):
            raise InvalidOutputError(f"{path} answered with {type(answer).__name__}, not a JSON object")
        self.upstream.metrics.record_usage(_chat_usage(answer.get("usage")))
        return answer

    def setup_routes(self, app: FastAPI) -> None:
        @app.post("/v1/responses")
        async def responses(request: Request) -> Response:
            return await self.answer("/responses", request)

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> Response:
            return await self.answer("/chat/completions", request)

        install_metrics_route(app, self.upstream.metrics)

    async def answer(self, path: str, request: Request) -> Response:
        """One call, streamed (`stream: true`, relayed as it comes) or not."""
        body = await read_generation_request(request)
        session = session_id(request)
        try:
            if body.get("stream"):
                metrics = self.upstream.metrics
                try:
                    relay = await open_relay(
                        self.upstream.client, metrics, path, self.upstream_body(body), session_id=session
                    )
                except ContextOverflowError:
                    metrics.context_overflows.inc()
                    raise
                return event_stream(relay)
            return JSONResponse(await self.forward(path, body, session=session))
        except asyncio.CancelledError:
            self.upstream.metrics.aborted.inc()
            raise


def _chat_usage(usage: Any) -> Any:
    """Responses usage (`input_tokens`/`output_tokens`) in the chat names the metrics read."""
    if isinstance(usage, dict) and "input_tokens" in usage:
        return {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}
    return usage
