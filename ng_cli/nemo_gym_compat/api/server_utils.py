"""`nemo_gym.server_utils`: `ServerClient`, the session key, and the server bases NeMo Gym's
servers derive from, on our HTTP and session plumbing.

`ServerClient.post(server_name=..., url_path=..., json=..., cookies=...)` answers an aiohttp
`ClientResponse` whose body is already read (so `raise_for_status`, `get_response_json`,
`.json()`, `.status` and `.cookies` all work after it returns), addressed by instance name
through the stack's server map. `SimpleServer.setup_session_middleware` is Starlette's
`SessionMiddleware` with NeMo Gym's cookie name and key (the session id a server reads under
`SESSION_ID_KEY`: the cookie's, else a new one), except under our stack (`SignedSession`):
* our signed `ng_session` decides: a call that carries one is in that rollout, whatever NeMo
  Gym's cookie says, so state survives a client that does not send NeMo Gym's cookie back;
* NeMo Gym's cookie is signed with a secret of the process, not NeMo Gym's key (the class and
  instance names, which anyone can read and sign a cookie naming another rollout's id with); it
  keeps a rollout together only for a client whose `ng_session` this server cannot verify;
* a call with neither is in the new session our session middleware made for it.

Every call goes through the process's one aiohttp session, NeMo Gym's `_GLOBAL_AIOHTTP_CLIENT`
(`set_global_aiohttp_client` sizes it from NeMo Gym's `global_aiohttp_*` keys; made on first use
otherwise; a closed one, from an event loop that is gone, is made again). What NeMo Gym's
`run_webserver` adds around a server's app is here for code that builds its own (their tests):
`setup_exception_middleware` (NeMo Gym's 500 answers, JSON strings) and
`setup_cancellation_middleware` (`ClientDisconnectCancellationMiddleware`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import urllib.error
import urllib.request
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar
from uuid import uuid4

import aiohttp
import anyio
import orjson
from aiohttp.base_protocol import BaseProtocol
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ng_cli.nemo_gym_compat.api.config_types import BaseRunServerInstanceConfig, BaseServerConfig
from ng_cli.nemo_gym_compat.api.global_config import (
    HEAD_SERVER_KEY_NAME,
    get_first_server_config_dict,
    get_global_config_dict,
    maybe_get_global_config_dict,
)
from ng_cli.servers.session import SESSION_COOKIE
from ng_cli.servers.spec import listed_urls

__all__ = [
    "SESSION_ID_KEY",
    "BaseServer",
    "ClientDisconnectCancellationMiddleware",
    "GlobalAIOHTTPAsyncClientConfig",
    "ServerClient",
    "SignedSession",
    "SimpleServer",
    "apply_rollout_prefix",
    "get_first_server_config_dict",
    "get_global_aiohttp_client",
    "get_response_json",
    "get_server_url",
    "is_global_aiohttp_client_setup",
    "is_nemo_gym_fastapi_entrypoint",
    "raise_for_status",
    "request",
    "rollout_path_prefix",
    "set_global_aiohttp_client",
]

logger = logging.getLogger("ng_cli.nemo_gym_compat")

SESSION_ID_KEY = "session_id"
MAX_NUM_TRIES = 3
_GLOBAL_AIOHTTP_CLIENT: aiohttp.ClientSession | None = None
"""The process's one client session (NeMo Gym's name: its own tests swap it per event loop)."""
_GLOBAL_AIOHTTP_CLIENT_REQUEST_DEBUG = False


class GlobalAIOHTTPAsyncClientConfig(BaseModel):
    """NeMo Gym's top-level keys sizing the process's client session (its pool and keepalive)."""

    global_aiohttp_connector_limit: int = Field(default=100 * 1024, ge=0)
    """Connections in the pool; 0 is unlimited."""
    global_aiohttp_connector_limit_per_host: int = Field(default=1024, ge=0)
    """Connections to one host; 0 is unlimited."""
    global_aiohttp_intended_concurrency: int | None = Field(default=None, gt=0)
    global_aiohttp_intended_concurrency_per_host: int | None = Field(default=None, gt=0)
    global_aiohttp_client_request_debug: bool = False
    global_aiohttp_tcp_keepalive_idle_seconds: int = Field(default=60, ge=1, le=32767)
    global_aiohttp_tcp_keepalive_interval_seconds: int = Field(default=10, ge=1, le=32767)
    global_aiohttp_tcp_keepalive_probes: int = Field(default=3, ge=1, le=127)


def _keepalive_socket_factory(cfg: GlobalAIOHTTPAsyncClientConfig) -> Callable[[Any], socket.socket]:
    """Outgoing sockets with TCP keepalive on, probing as `cfg` says (NeMo Gym's): a peer that
    vanished without a FIN is noticed instead of waited on forever."""

    def factory(addr_info: Any) -> socket.socket:
        family, type_, proto, _, _ = addr_info
        sock = socket.socket(family=family, type=type_, proto=proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in (
            ("TCP_KEEPIDLE", cfg.global_aiohttp_tcp_keepalive_idle_seconds),
            ("TCP_KEEPINTVL", cfg.global_aiohttp_tcp_keepalive_interval_seconds),
            ("TCP_KEEPCNT", cfg.global_aiohttp_tcp_keepalive_probes),
        ):
            if hasattr(socket, option):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
        return sock

    return factory


def set_global_aiohttp_client(cfg: GlobalAIOHTTPAsyncClientConfig) -> aiohttp.ClientSession:
    """Make the process's client session from `cfg` (NeMo Gym's: refused while one is set up).
    No cookie jar: cookies go per call, as NeMo Gym's servers pass them."""
    global _GLOBAL_AIOHTTP_CLIENT, _GLOBAL_AIOHTTP_CLIENT_REQUEST_DEBUG
    assert not is_global_aiohttp_client_setup(), (
        "There is already a global aiohttp client setup. Please refactor your code or call "
        "`global_aiohttp_client_exit` if you want to explicitly re-make the client!"
    )
    _GLOBAL_AIOHTTP_CLIENT = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(
            limit=cfg.global_aiohttp_connector_limit,
            limit_per_host=cfg.global_aiohttp_connector_limit_per_host,
            keepalive_timeout=4.0,  # under uvicorn's 5 s: never reuse one the server is closing
            socket_factory=_keepalive_socket_factory(cfg),
        ),
        cookie_jar=aiohttp.DummyCookieJar(),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        json_serialize=lambda obj: orjson.dumps(obj).decode(),
    )
    _GLOBAL_AIOHTTP_CLIENT_REQUEST_DEBUG = cfg.global_aiohttp_client_request_debug
    return _GLOBAL_AIOHTTP_CLIENT


def is_global_aiohttp_client_setup() -> bool:
    """A session is set up and still open (a closed one, from an event loop gone, is not)."""
    return _GLOBAL_AIOHTTP_CLIENT is not None and not _GLOBAL_AIOHTTP_CLIENT.closed


def is_global_aiohttp_client_request_debug_enabled() -> bool:
    return _GLOBAL_AIOHTTP_CLIENT_REQUEST_DEBUG


def get_global_aiohttp_client() -> aiohttp.ClientSession:
    """The process's session, made on first use from the stack's `global_aiohttp_*` keys."""
    if is_global_aiohttp_client_setup():
        assert _GLOBAL_AIOHTTP_CLIENT is not None
        return _GLOBAL_AIOHTTP_CLIENT
    tree = maybe_get_global_config_dict()
    values = OmegaConf.to_container(tree, resolve=True) if tree is not None else {}
    fields = GlobalAIOHTTPAsyncClientConfig.model_fields
    known = {key: value for key, value in dict(values or {}).items() if key in fields}  # type: ignore[arg-type]
    return set_global_aiohttp_client(GlobalAIOHTTPAsyncClientConfig.model_validate(known))


async def close_client_session() -> None:
    """Close the process's session and forget it (NeMo Gym's `global_aiohttp_client_exit`, awaited)."""
    global _GLOBAL_AIOHTTP_CLIENT
    if _GLOBAL_AIOHTTP_CLIENT is not None and not _GLOBAL_AIOHTTP_CLIENT.closed:
        await _GLOBAL_AIOHTTP_CLIENT.close()
    _GLOBAL_AIOHTTP_CLIENT = None


async def request(
    method: str, url: str, _max_connection_retries: int | None = None, **kwargs: Any
) -> aiohttp.ClientResponse:
    """One HTTP call with the body read; connection failures are retried (NeMo Gym tries 3 times).

    `_max_connection_retries` caps the retries (0: one try); None is the 3 tries here, where NeMo
    Gym retries forever (a server here fails the row rather than hang on a dead endpoint)."""
    kwargs.pop("_internal", None)
    kwargs.pop("_server_name", None)
    if isinstance(kwargs.get("json"), BaseModel):
        kwargs["json"] = kwargs["json"].model_dump(exclude_unset=True)
    tries = MAX_NUM_TRIES if _max_connection_retries is None else 1 + max(0, _max_connection_retries)
    for attempt in range(1, tries + 1):
        try:
            response = await get_global_aiohttp_client().request(method, url, **kwargs)
            response.content = _replayable(await response.read())
            return response
        except (TimeoutError, aiohttp.ClientConnectionError):
            if attempt == tries:
                raise
            await asyncio.sleep(0.5 * attempt)
    raise AssertionError("unreachable")


def _replayable(body: bytes) -> aiohttp.StreamReader:
    """The answer's body, read already, as a fresh stream for code that reads `response.content`
    (NeMo Gym's simple_agent reads a tool's answer with `content.read()`): aiohttp's is spent."""
    loop = asyncio.get_running_loop()
    stream = aiohttp.StreamReader(BaseProtocol(loop), limit=max(2**16, len(body)), loop=loop)
    if body:
        stream.feed_data(body)
    stream.feed_eof()
    return stream


async def raise_for_status(response: aiohttp.ClientResponse, content: bytes | None = None) -> None:
    """aiohttp's `raise_for_status`, with the answer's body kept on the error (`response_content`)."""
    if not response.ok:
        body = content if content is not None else await response.content.read()
        read_before = getattr(response, "_body", None)
        if not body and isinstance(read_before, bytes):
            body = read_before  # read already (here every answer is): its stream was spent before
        try:
            response.raise_for_status()
        except aiohttp.ClientResponseError as error:
            error.response_content = body  # type: ignore[attr-defined]
            raise


async def get_response_json(response: aiohttp.ClientResponse) -> Any:
    return orjson.loads(await response.read())


def is_nemo_gym_fastapi_entrypoint(file: str) -> bool:
    """NeMo Gym's multi-worker re-import guard; servers here are one process each."""
    return False


def rollout_path_prefix(rollout_id: str | None, *, token_capture: bool = False) -> str:
    return "" if rollout_id is None else f"/_ng_rollout/{rollout_id}"


def apply_rollout_prefix(base_url: str, rollout_id: str | None, *, token_capture: bool = False) -> str:
    """A model server's root URL with the rollout's prefix (none without a rollout id, as here:
    NeMo Gym's rollout-path capture is off, see `SimpleResponsesAPIAgent.rollout_id_from_run`)."""
    if not rollout_id:
        return base_url
    return base_url.rstrip("/") + rollout_path_prefix(rollout_id, token_capture=token_capture)


def get_server_url(server_name: str) -> str:
    block = get_first_server_config_dict(get_global_config_dict(), server_name)
    return f"http://{block['host']}:{block['port']}"


class ClientDisconnectCancellationMiddleware:
    """NeMo Gym's: a client that disconnects before its answer is out cancels the whole request.

    As our `CancelOnDisconnectMiddleware` (`ng_cli.servers.disconnect`), a watcher owns the
    connection's `receive` and the app reads the request through it; unlike ours, the app runs in
    an anyio cancel scope, and a disconnect cancels the scope, not one task. The difference is
    what NeMo Gym's servers rely on: a scope stays cancelled, so work the app started in tasks of
    its own under that scope (Starlette's `@app.middleware` runs the route in one) is cancelled
    too, even when a middleware in between catches the `CancelledError` and answers (NeMo Gym's
    exception middleware answers "Request was cancelled"). An edge cancellation of the outer task
    stops there, and the route under it runs on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.num_cancelled = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        inbox: asyncio.Queue[Message] = asyncio.Queue()
        gone = asyncio.Event()
        answered = asyncio.Event()

        async def app_receive() -> Message:
            return await inbox.get()

        async def app_send(message: Message) -> None:
            if gone.is_set():
                return  # nobody to send it to
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered.set()

        async with anyio.create_task_group() as group:

            async def run_app() -> None:
                try:
                    await self.app(scope, app_receive, app_send)
                finally:
                    group.cancel_scope.cancel()  # the answer is out (or failed): stop the watcher

            async def watch() -> None:
                while True:
                    message = await receive()
                    if message["type"] != "http.disconnect":
                        await inbox.put(message)
                        continue
                    if answered.is_set():
                        return  # uvicorn reports a disconnect after every complete answer
                    await inbox.put(message)
                    gone.set()
                    self.num_cancelled += 1
                    logger.info("%s %s: the client went away; its work was cancelled",
                                scope.get("method"), scope.get("path"))  # fmt: skip
                    group.cancel_scope.cancel()
                    return

            group.start_soon(run_app)
            group.start_soon(watch)


class ServerClient(BaseModel):
    """Calls the stack's other servers by instance name (NeMo Gym's `server_client`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    head_server_config: BaseServerConfig
    global_config_dict: DictConfig

    _server_base_urls: dict[str, str] = PrivateAttr(default_factory=dict)
    """Resolved base URLs by server name (NeMo Gym's cache; its own tests fill it with bound ports)."""

    @field_validator("global_config_dict", mode="before")
    @classmethod
    def _as_dict_config(cls, value: Any) -> Any:
        return OmegaConf.create(value) if isinstance(value, dict) else value

    @classmethod
    def load_head_server_config(cls) -> BaseServerConfig:
        return BaseServerConfig.model_validate(get_global_config_dict()[HEAD_SERVER_KEY_NAME])

    @classmethod
    def load_from_global_config(cls, head_server_config: BaseServerConfig | None = None) -> ServerClient:
        return cls(
            head_server_config=head_server_config or cls.load_head_server_config(),
            global_config_dict=get_global_config_dict(),
        )

    def _resolve_base_url(self, server_name: str) -> str:
        cached = self._server_base_urls.get(server_name)
        if cached is None:
            if server_name not in self.global_config_dict:
                known = ", ".join(
                    sorted(str(k) for k in self.global_config_dict if k != HEAD_SERVER_KEY_NAME)
                )
                raise ValueError(
                    f"no server named '{server_name}' in this stack (servers: {known or 'none'})"
                )
            block = get_first_server_config_dict(self.global_config_dict, server_name)
            cached = self._server_base_urls[server_name] = f"http://{block.host}:{block.port}"
        return cached

    def _build_server_base_url(self, server_config_dict: Any) -> str:
        return f"http://{server_config_dict['host']}:{server_config_dict['port']}"

    def poll_for_status(self, server_name: str, *, timeout_seconds: float = 5) -> str:
        """ "success" once the server answers at all (any status), as NeMo Gym's; blocking."""
        try:
            if server_name == HEAD_SERVER_KEY_NAME:
                url = f"http://{self.head_server_config.host}:{self.head_server_config.port}"
            else:
                url = self._resolve_base_url(server_name)
            urllib.request.urlopen(url, timeout=timeout_seconds).close()
        except urllib.error.HTTPError:
            return "success"
        except TimeoutError:
            return "timeout"
        except urllib.error.URLError as error:
            return "timeout" if isinstance(error.reason, TimeoutError) else "connection_error"
        except Exception:
            return "unknown_error"
        return "success"

    async def request(
        self, server_name: str, url_path: str, method: str, **kwargs: Any
    ) -> aiohttp.ClientResponse:
        """A call that cannot connect (after NeMo Gym's tries) is made once more where the head
        says the server is now: one restarted on another Ray node (its own node lost) has moved."""
        try:
            return await request(method, f"{self._resolve_base_url(server_name)}{url_path}", **kwargs)
        except (TimeoutError, aiohttp.ClientConnectionError):
            if not await self._follow_move(server_name):
                raise
            return await request(method, f"{self._resolve_base_url(server_name)}{url_path}", **kwargs)

    async def _follow_move(self, server_name: str) -> bool:
        """Re-read `server_name`'s address from the head's `/servers` (ng_run's live plan); True
        when it changed. A head that cannot say leaves the address as it was."""
        head_config = getattr(self, "head_server_config", None)  # absent: `model_construct` without one
        if head_config is None:
            return False
        head = f"http://{head_config.host}:{head_config.port}/servers"
        try:
            listed = orjson.loads(await (await request("GET", head)).read())
        except (TimeoutError, aiohttp.ClientError, orjson.JSONDecodeError):
            return False
        url = listed_urls(listed).get(server_name)
        if url is None or url == self._resolve_base_url(server_name):
            return False
        self._server_base_urls[server_name] = url
        return True

    async def get(self, server_name: str, url_path: str, **kwargs: Any) -> aiohttp.ClientResponse:
        return await self.request(server_name, url_path, "GET", **kwargs)

    async def post(self, server_name: str, url_path: str, **kwargs: Any) -> aiohttp.ClientResponse:
        return await self.request(server_name, url_path, "POST", **kwargs)


class BaseServer(BaseModel):
    """A NeMo Gym server: a pydantic model holding its config (and its state, in fields)."""

    config: BaseRunServerInstanceConfig

    def setup_liveness(self, app: FastAPI) -> None:
        async def liveness() -> dict[str, str]:
            return {"status": "ok"}

        for path in ("/readyz", "/livez", "/healthz"):
            app.get(path, include_in_schema=False)(liveness)


AppFactory = Callable[[], FastAPI]


@dataclass(frozen=True)
class SignedSession:
    """Our signed `ng_session` on a call, as the adapter reads it (not NeMo Gym's)."""

    session_id: str
    is_carried: bool
    """The call sent it; else our session middleware made it for this call (and sets its cookie)."""


class SimpleServer(BaseServer):
    """The base of NeMo Gym's runnable servers: `setup_webserver()` builds its FastAPI app."""

    server_client: ServerClient
    ray_enabled: ClassVar[bool | None] = None

    _ng_app_factory: AppFactory | None = PrivateAttr(default=None)
    """Set by the adapter under our stack: the app with our plumbing (health, errors, body
    limits, our session cookie) that `new_app` starts from; unset (their own tests) a bare app."""
    _ng_session_of: Callable[[Request], SignedSession | None] | None = PrivateAttr(default=None)
    """Set by the adapter: our signed session on a call (None outside our plumbing)."""
    _ng_cookie_secret: str | None = PrivateAttr(default=None)
    """Set by the adapter: what NeMo Gym's session cookie is signed with, instead of its public key."""

    def new_app(self) -> FastAPI:
        factory = getattr(self, "_ng_app_factory", None)
        return factory() if factory is not None else FastAPI()

    @abstractmethod
    def setup_webserver(self) -> FastAPI: ...

    def get_session_middleware_key(self) -> str:
        return f"{self.__class__.__name__}___{self.config.name}"

    def setup_session_middleware(self, app: FastAPI) -> None:
        if getattr(app.state, "nemo_gym_session_middleware_installed", False):
            return
        app.state.nemo_gym_session_middleware_installed = True

        @app.middleware("http")
        async def add_session_id(request: Request, call_next: Callable[[Request], Any]) -> Response:
            request.session[SESSION_ID_KEY] = self._session_id_of(request)
            response: Response = await call_next(request)
            self._echo_our_session(request, response)
            return response

        key = self.get_session_middleware_key()
        secret = getattr(self, "_ng_cookie_secret", None) or key
        app.add_middleware(SessionMiddleware, secret_key=secret, session_cookie=key)

    def setup_exception_middleware(self, app: FastAPI) -> None:
        """NeMo Gym's last-resort error answers, as its `run_webserver` installs them: an upstream
        error (`raise_for_status`'s, its body kept) is a 500 whose JSON string quotes that body; a
        cancelled handler a 500 "Request was cancelled"; any other exception a 500 of its `repr`.
        The answer is a JSON string, not our envelope: NeMo Gym's agents and collector read it so."""
        key = self.get_session_middleware_key()

        @app.middleware("http")
        async def exception_handling_middleware(request: Request, call_next: Callable[[Request], Any]) -> Any:
            try:
                return await call_next(request)
            except aiohttp.ClientResponseError as error:
                content = getattr(error, "response_content", None)
                logger.warning("%s: an inner server answered %s: %r", key, error.status, content)
                return JSONResponse(
                    content=f"Hit an exception in {key} calling an inner server: {content}", status_code=500
                )
            except asyncio.CancelledError:
                return JSONResponse(content="Request was cancelled", status_code=500)
            except Exception as error:
                logger.exception("%s %s in %s", request.method, request.url.path, key)
                return JSONResponse(content=repr(error), status_code=500)

    def setup_cancellation_middleware(self, app: FastAPI) -> None:
        """A client that disconnects cancels everything its request started (NeMo Gym's
        `ClientDisconnectCancellationMiddleware`, outermost)."""
        app.add_middleware(ClientDisconnectCancellationMiddleware)

    def _echo_our_session(self, request: Request, response: Response) -> None:
        """Our `ng_session` a call carried, set again on its answer, as Starlette's middleware sets
        NeMo Gym's cookie on every answer: NeMo Gym's agents send on only the cookies of the last
        answer (`response.cookies`), so without it a rollout's next call would carry none, get a
        fresh session, and the call after that would be in it (`Session not initialized`)."""
        session_of: Callable[[Request], SignedSession | None] | None = getattr(self, "_ng_session_of", None)
        ours = session_of(request) if session_of is not None else None
        cookie = getattr(request.state, "session_cookie", None)
        if ours is not None and ours.is_carried and cookie:
            response.set_cookie(SESSION_COOKIE, str(cookie), path="/", httponly=True)

    def _session_id_of(self, request: Request) -> str:
        """The call's session id: NeMo Gym's cookie's, else a new one; under our stack our signed
        session's, unless the call carries none and NeMo Gym's cookie (signed with this process's
        secret there) names one (see the module doc)."""
        current = request.session.get(SESSION_ID_KEY)
        session_of: Callable[[Request], SignedSession | None] | None = getattr(self, "_ng_session_of", None)
        ours = session_of(request) if session_of is not None else None
        if ours is None:
            return str(current) if current else str(uuid4())
        if ours.is_carried or not current:
            return ours.session_id
        return str(current)

    @classmethod
    def run_webserver(cls) -> None:
        raise SystemExit(
            f"{cls.__name__}: under ng_cli a NeMo Gym server is started by ng_run "
            '("+config_paths=[...]"), not by running its app.py'
        )
