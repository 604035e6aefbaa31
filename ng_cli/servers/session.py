"""The per-rollout session: a signed `ng_session` cookie that every hop forwards.

The agent's `/run` starts a rollout; its session id travels as a cookie to the resources server
(per-rollout state) and the model server (endpoint affinity). The value is signed with the
stack's secret so a client cannot pick another rollout's session by guessing its id.
"""

from __future__ import annotations

import secrets as _random
from collections.abc import Mapping

from itsdangerous import BadSignature, Signer
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "SESSION_COOKIE",
    "RolloutCookies",
    "SessionMiddleware",
    "SessionSigner",
    "forwarded_cookies",
    "session_id",
]

SESSION_COOKIE = "ng_session"


class SessionSigner:
    """Creates and checks signed session cookie values."""

    def __init__(self, secret: str) -> None:
        self._signer = Signer(secret, salt="ng_session")

    def new(self) -> tuple[str, str]:
        """A fresh (session_id, cookie_value) pair."""
        session = _random.token_hex(16)
        return session, self._signer.sign(session).decode()

    def verify(self, cookie_value: str) -> str | None:
        """The session id inside a cookie value, or None if the signature does not hold."""
        try:
            return self._signer.unsign(cookie_value).decode()
        except BadSignature:
            return None


class SessionMiddleware:
    """Pure ASGI middleware: puts `session_id` and `session_cookie` on `request.state`.

    A request without a valid cookie gets a new session, returned with `Set-Cookie`.
    """

    def __init__(self, app: ASGIApp, *, signer: SessionSigner) -> None:
        self.app = app
        self.signer = signer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cookie_value = _read_cookie(scope)
        session = self.signer.verify(cookie_value) if cookie_value else None
        is_new = session is None
        if session is None:
            session, cookie_value = self.signer.new()
        state = scope.setdefault("state", {})
        state["session_id"] = session
        state["session_cookie"] = cookie_value

        async def send_with_cookie(message: Message) -> None:
            if is_new and message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"set-cookie", f"{SESSION_COOKIE}={cookie_value}; Path=/; HttpOnly".encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_cookie)


_COOKIE_PREFIX = SESSION_COOKIE + "="


def _read_cookie(scope: Scope) -> str | None:
    # A plain split: our value is URL-safe (hex id + itsdangerous signature), and SimpleCookie
    # costs tens of microseconds on the hot path of every call.
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])  # ASGI: (name, value) byte pairs
    for key, value in headers:
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                part = part.strip()
                if part.startswith(_COOKIE_PREFIX):
                    return part[len(_COOKIE_PREFIX) :]
    return None


def session_id(request: Request) -> str:
    """The rollout's session id (set by `SessionMiddleware`)."""
    return str(request.state.session_id)


def forwarded_cookies(request: Request) -> dict[str, str]:
    """Cookies to send downstream so the next server sees the same session."""
    return {SESSION_COOKIE: str(request.state.session_cookie)}


class RolloutCookies(dict[str, str]):
    """The cookies of one rollout: our `ng_session`, plus those a server sets during the rollout.

    NeMo Gym's servers keep per-rollout state under their own session cookie (one per server,
    set on the first call); a client that sends only its own cookie loses that state. The agent
    passes one `RolloutCookies` to every call of a rollout, and `HttpClient` keeps each
    `Set-Cookie` in it, so later calls send it back (our own cookie is never replaced)."""

    def keep(self, set_cookies: Mapping[str, str]) -> None:
        for name, value in set_cookies.items():
            if name != SESSION_COOKIE:
                self[name] = value
