"""`VllmModelServer`: the routes of every model server over vLLM (vllm_model, local_vllm_model).

The two implementations differ only in their config class, in how a timed-out sample is
explained, and in whether the engines take weight updates (`weight_updater`: local_vllm_model's
engines, started with `weight_updates: true`); routes, conversion, token ids, versions, routing,
failover and metrics are these, once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Protocol, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response

from ng_cli.conversion.tool_calls import TOOL_CALL_PARSERS
from ng_cli.errors import ConfigError, NgError, NotFoundError, UpstreamTimeoutError
from ng_cli.model_server.admin_routes import install_admin_routes
from ng_cli.model_server.token_exact import TokenExactChat
from ng_cli.model_server.vllm import VllmChat
from ng_cli.model_server.vllm_stream import VllmStreams
from ng_cli.model_server.vllm_weight_routes import install_vllm_weight_routes
from ng_cli.servers import JSONResponse, ModelServer, read_generation_request, session_id
from ng_cli.servers.app import event_stream
from ng_cli.tokens.chat_template import ChatTokenizer
from ng_cli.upstream.config import VllmModelConfig
from ng_cli.upstream.metrics import install_metrics_route
from ng_cli.upstream.runtime import Upstream
from ng_cli.upstream.versions import WeightVersions
from ng_cli.upstream.weights import WeightUpdater

__all__ = ["VllmModelServer"]

C = TypeVar("C", bound=VllmModelConfig)


class _Opener(Protocol):
    """`VllmStreams.open_responses` / `open_chat`: a request body -> its server-sent events."""

    def __call__(
        self, body: dict[str, Any], *, session_id: str | None
    ) -> Awaitable[AsyncIterator[bytes]]: ...


class _Caller(Protocol):
    """`VllmChat.respond` / `chat`: a request body -> the whole answer."""

    def __call__(self, body: dict[str, Any], *, session_id: str | None) -> Awaitable[dict[str, Any]]: ...


class VllmModelServer(ModelServer[C]):
    """`POST /v1/responses`, `POST /v1/chat/completions` (each with `stream: true` too),
    `GET /metrics` over vLLM endpoints."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.upstream = Upstream(self.upstream_config(), self.http, server=self.name)
        config: VllmModelConfig = self.upstream.config  # type: ignore[assignment]
        self.versions = WeightVersions(server=self.name)
        self.weights = self.weight_updater()
        if self.weights is not None:
            self.upstream.prober.before_rejoin = self.weights.restore
        self.upstream.metrics.weight_version.set_function(lambda: self.versions.version)
        self.vllm = VllmChat(
            config,
            self.upstream.client,
            self.upstream.metrics,
            token_exact=self._token_exact(config),
            versions=self.versions,
            salts_by_version=self.weights is not None,
        )
        self.streams = VllmStreams(self.vllm)
        self.started_at = int(time.time())

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

    def weight_updater(self) -> WeightUpdater | None:
        """The updater of this server's engines' weights; None: they take no updates."""
        return None

    def timeout_error(self, error: UpstreamTimeoutError) -> NgError:
        """What a caller is told when no answer came in time (a subclass may say more)."""
        return error

    async def on_startup(self) -> None:
        await self.upstream.start()  # an NgError here ends the process with its message

    async def on_shutdown(self) -> None:
        await self.upstream.stop()

    def setup_routes(self, app: FastAPI) -> None:
        @app.post("/v1/responses")
        async def responses(request: Request) -> Response:
            return await self._answer(request, self.streams.open_responses, self.vllm.respond)

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> Response:
            return await self._answer(request, self.streams.open_chat, self.vllm.chat)

        @app.get("/v1/models")
        async def models() -> JSONResponse:
            return JSONResponse({"object": "list", "data": [self._model_card()]})

        @app.get("/v1/models/{model_id:path}")
        async def model(model_id: str) -> JSONResponse:
            if model_id != self.config.model:
                raise NotFoundError(
                    f"The model {model_id!r} does not exist on this server; it serves {self.config.model!r}",
                    param="model",
                )
            return JSONResponse(self._model_card())

        install_metrics_route(app, self.upstream.metrics)
        if self.weights is not None:
            key = self.config.api_key.get_secret_value()
            install_admin_routes(app, self.weights, key=key)
            # TRL's VLLMClient syncs through vLLM's own routes: the same updater answers them.
            backend = str(getattr(self.config, "weight_transfer", "none"))
            install_vllm_weight_routes(app, self.weights, key=key, backend=backend)

    async def _answer(self, request: Request, stream: _Opener, whole: _Caller) -> Response:
        """One generation route: its body, streamed (`stream`) or whole (`whole`); a timeout said the
        implementation's way; a client that went away counted (vLLM learns it from the closed connection)."""
        body = await read_generation_request(request)
        session = session_id(request)
        try:
            if body.get("stream"):
                return event_stream(await stream(body, session_id=session))
            return JSONResponse(await whole(body, session_id=session))
        except UpstreamTimeoutError as error:
            raise self.timeout_error(error) from error
        except asyncio.CancelledError:
            self.upstream.metrics.aborted.inc()
            raise

    def _model_card(self) -> dict[str, Any]:
        """The OpenAI `Model` object of the one model this server serves (what SDKs list)."""
        return {"id": self.config.model, "object": "model", "created": self.started_at, "owned_by": "ng_cli"}
