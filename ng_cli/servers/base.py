"""`BaseServer`: what every server kind shares — its config, the HTTP client, the app, its neighbours.

A server implementation (`<server_type>/<implementation>/app.py`) subclasses one of
`ResourcesServer`, `ModelServer` or `AgentServer`, names its `config_class`, and adds routes in
`setup_routes`. It is constructed from a `ServerSpec` by `ng_cli.servers.child` in its own
process, or directly in tests.
"""

from __future__ import annotations

import os
import secrets as _random
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Generic, TypeVar

from fastapi import FastAPI

from ng_cli.config.schema import ServerConfig, ServerRef
from ng_cli.config.secrets import Redactor
from ng_cli.errors import ConfigError, NgError, UpstreamError, UpstreamUnavailableError
from ng_cli.servers.app import build_app
from ng_cli.servers.http import HttpClient, RetryPolicy
from ng_cli.servers.session import SessionMiddleware, SessionSigner
from ng_cli.servers.spec import ServerAddress, listed_urls

__all__ = ["BaseServer", "ConfigT"]

ConfigT = TypeVar("ConfigT", bound=ServerConfig)


class BaseServer(Generic[ConfigT]):
    """Base of the three server kinds. Subclasses set `config_class` and override the hooks."""

    server_type: ClassVar[str] = ""
    config_class: ClassVar[type[ServerConfig]] = ServerConfig

    def __init__(
        self,
        config: ConfigT,
        *,
        name: str,
        servers: Mapping[str, ServerAddress] | None = None,
        head_url: str | None = None,
        session_secret: str | None = None,
    ) -> None:
        self.config = config
        self.name = name
        self.servers = dict(servers or {})
        self.head_url = head_url
        self.signer = SessionSigner(session_secret or _random.token_hex(32))
        self.http = HttpClient()
        self.redactor = Redactor.of(config)
        """Hides this server's secrets (its config's) in every answer and log line."""

    def url_of(self, ref: ServerRef) -> str:
        """Base URL of another server of the stack, by its `{type, name}` reference."""
        address = self.servers.get(ref.name)
        if address is None or address.server_type != ref.type:
            known = ", ".join(sorted(self.servers)) or "none"
            raise ConfigError(
                f"server '{self.name}' refers to {ref.type} '{ref.name}', which is not part of this stack "
                f"(known: {known})"
            )
        return address.url

    async def follow_moves(self) -> bool:
        """Re-read where the stack's other servers listen from the head's `/servers`: one restarted
        on another Ray node (its own node lost) has a new address. True when an address changed;
        False without a head, or when the head cannot say."""
        if self.head_url is None:
            return False
        try:
            listed = await self.http.get_json(f"{self.head_url.rstrip('/')}/servers")
        except UpstreamError:
            return False
        changed = False
        for name, url in listed_urls(listed).items():
            known = self.servers.get(name)
            if known is not None and url != known.url.rstrip("/"):
                self.servers[name] = known.model_copy(update={"url": url})
                changed = True
        return changed

    async def post_json_to(
        self, ref: ServerRef, path: str, payload: Any, *, retry: RetryPolicy | None = None, **kwargs: Any
    ) -> Any:
        """POST to another server of the stack by reference (retried as `retry` says, else once).
        One that cannot be reached and that the head says has moved (restarted on another Ray
        node) is called once more at its new address: agents calling their environment and model,
        environments calling their judge."""
        for may_follow in (True, False):
            url = f"{self.url_of(ref)}{path}"
            try:
                if retry is None:
                    return await self.http.post_json(url, payload, **kwargs)
                return await self.http.post_json_with_retry(url, payload, retry=retry, **kwargs)
            except UpstreamUnavailableError:
                if not may_follow or not await self.follow_moves():
                    raise
        raise AssertionError("unreachable: the second try returns or raises")

    def setup_routes(self, app: FastAPI) -> None:
        """Add this server's routes. The base adds none."""

    async def on_startup(self) -> None:
        """Runs once before the first request (after the event loop exists)."""

    async def on_shutdown(self) -> None:
        """Runs once at shutdown, before the HTTP client closes."""

    def build_app(self, *, exit_on_startup_error: bool = False) -> FastAPI:
        """The ASGI app for this server: shared plumbing plus `setup_routes`.

        With `exit_on_startup_error` (server processes), an `NgError` from `on_startup` is printed
        as a plain message and the process exits with its code, instead of uvicorn's traceback.
        """

        @asynccontextmanager
        async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
            try:
                await self.on_startup()
            except NgError as error:
                if not exit_on_startup_error:
                    raise
                print(f"error: {self.name}: {error.message}", file=sys.stderr)
                if error.hint:
                    print(f"hint: {error.hint}", file=sys.stderr)
                sys.stderr.flush()
                os._exit(error.exit_code)  # uvicorn would log a traceback for any exception
            try:
                yield
            finally:
                await self.on_shutdown()
                await self.http.close()

        app = build_app(
            self.name,
            lifespan=lifespan,
            max_request_bytes=self.config.max_request_bytes,
            max_request_bytes_in_flight=self.config.request_bytes_in_flight_limit,
            request_bytes_wait_s=self.config.request_bytes_wait_s,
            redactor=self.redactor,
        )
        app.state.server = self
        app.add_middleware(SessionMiddleware, signer=self.signer)
        self.setup_routes(app)
        return app

    @classmethod
    def validate_config(
        cls, block: Mapping[str, Any], *, instance: str, source: str | None = None
    ) -> ConfigT:
        """The typed config of one instance; a bad block is a ConfigError naming instance and keys."""
        from ng_cli.config.schema import validate_block

        return validate_block(cls.config_class, dict(block), instance=instance, source=source)  # type: ignore[return-value]
