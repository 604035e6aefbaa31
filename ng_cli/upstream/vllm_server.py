"""`VllmModelServer`: the routes of every model server over vLLM (vllm_model, local_vllm_model).

The two implementations differ only in their config class and in how a timed-out sample is
explained; routes, conversion, token ids, routing, failover and metrics are these, once.
"""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import FastAPI, Request

from ng_cli.conversion.tool_calls import TOOL_CALL_PARSERS
from ng_cli.errors import ConfigError, NgError, UpstreamTimeoutError
from ng_cli.servers import JSONResponse, ModelServer, read_generation_request, session_id
from ng_cli.tokens.chat_template import ChatTokenizer
from ng_cli.upstream.config import VllmModelConfig
from ng_cli.upstream.metrics import install_metrics_route
from ng_cli.upstream.runtime import Upstream
from ng_cli.upstream.token_exact import TokenExactChat
from ng_cli.upstream.vllm import VllmChat

__all__ = ["VllmModelServer"]

C = TypeVar("C", bound=VllmModelConfig)


class VllmModelServer(ModelServer[C]):
    """`POST /v1/responses`, `POST /v1/chat/completions`, `GET /metrics` over vLLM endpoints."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.upstream = Upstream(self.upstream_config(), self.http, server=self.name)
        config: VllmModelConfig = self.upstream.config  # type: ignore[assignment]
        self.vllm = VllmChat(
            config, self.upstream.client, self.upstream.metrics, token_exact=self._token_exact(config)
        )

    def _token_exact(self, config: VllmModelConfig) -> TokenExactChat | None:
        """The tokenizer and parser of `token_exact`, loaded once at start (None when it is off)."""
        directory = config.tokenizer_dir()
        if not config.wants_token_exact() or directory is None:
            return None
        try:
            tokenizer = ChatTokenizer.load(directory)
        except NgError as error:
            raise ConfigError(f"'{self.name}': token_exact: {error.message}", hint=error.hint) from None
        return TokenExactChat(tokenizer, TOOL_CALL_PARSERS[config.tool_call_parser], self.upstream.client)

    def upstream_config(self) -> VllmModelConfig:
        """The config the upstream calls run with (a subclass may adjust its budgets)."""
        return self.config

    def timeout_error(self, error: UpstreamTimeoutError) -> NgError:
        """What a caller is told when no answer came in time (a subclass may say more)."""
        return error

    async def on_startup(self) -> None:
        await self.upstream.start()  # an NgError here ends the process with its message

    async def on_shutdown(self) -> None:
        await self.upstream.stop()

    def setup_routes(self, app: FastAPI) -> None:
        @app.post("/v1/responses")
        async def responses(request: Request) -> JSONResponse:
            body = await read_generation_request(request)
            try:
                return JSONResponse(await self.vllm.respond(body, session_id=session_id(request)))
            except UpstreamTimeoutError as error:
                raise self.timeout_error(error) from error

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> JSONResponse:
            body = await read_generation_request(request)
            try:
                return JSONResponse(await self.vllm.chat(body, session_id=session_id(request)))
            except UpstreamTimeoutError as error:
                raise self.timeout_error(error) from error

        install_metrics_route(app, self.upstream.metrics)
