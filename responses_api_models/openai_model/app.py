"""openai_model: `/v1/responses` and `/v1/chat/completions` passed through to an OpenAI-compatible API.

The body is forwarded unchanged except `model`, which the config sets. Endpoint choice, retries,
timeouts, health and metrics are the same as vllm_model's (`ng_cli.upstream`); a context
overflow is answered as the upstream's 400 and counted.
"""

from __future__ import annotations

from typing import Any, ClassVar

from fastapi import FastAPI, Request

from ng_cli.errors import BadRequestError, ContextOverflowError, InvalidOutputError
from ng_cli.servers import JSONResponse, ModelServer, read_generation_request, session_id
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

    async def forward(self, path: str, body: dict[str, Any], *, session: str) -> dict[str, Any]:
        """POST `body` (with the configured model) to `<base_url><path>`; the answer as is."""
        if body.get("stream"):
            raise BadRequestError("stream=true is not supported by openai_model", hint="send stream=false")
        body = {**(self.config.extra_body or {}), **body, "model": self.config.model}
        if self.config.drop_input_reasoning_items and isinstance(body.get("input"), list):
            body["input"] = [
                item
                for item in body["input"]
                if not (isinstance(item, dict) and item.get("type") == "reasoning")
            ]
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
        async def responses(request: Request) -> JSONResponse:
            body = await read_generation_request(request)
            return JSONResponse(await self.forward("/responses", body, session=session_id(request)))

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> JSONResponse:
            body = await read_generation_request(request)
            return JSONResponse(await self.forward("/chat/completions", body, session=session_id(request)))

        install_metrics_route(app, self.upstream.metrics)


def _chat_usage(usage: Any) -> Any:
    """Responses usage (`input_tokens`/`output_tokens`) in the chat names the metrics read."""
    if isinstance(usage, dict) and "input_tokens" in usage:
        return {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}
    return usage
