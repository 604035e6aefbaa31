"""The server framework: the app factory, the one HTTP client, and the three server kinds.

Names are imported lazily: a client process (the collector, ng_status) that only needs
`ng_cli.servers.http` does not pay for importing FastAPI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ng_cli.lazy import lazy_exports

if TYPE_CHECKING:
    from ng_cli.servers.agent import AgentServer
    from ng_cli.servers.app import JSONResponse, build_app, read_json_object
    from ng_cli.servers.base import BaseServer
    from ng_cli.servers.http import HttpClient, RetryPolicy, Timeouts
    from ng_cli.servers.model import ModelServer, read_generation_request
    from ng_cli.servers.resources import ResourcesServer, ToolError, VerifyRequest, tool
    from ng_cli.servers.session import SESSION_COOKIE, forwarded_cookies, session_id

_HOMES = {
    "AgentServer": "agent",
    "JSONResponse": "app",
    "build_app": "app",
    "read_json_object": "app",
    "BaseServer": "base",
    "HttpClient": "http",
    "RetryPolicy": "http",
    "Timeouts": "http",
    "ModelServer": "model",
    "read_generation_request": "model",
    "ResourcesServer": "resources",
    "ToolError": "resources",
    "VerifyRequest": "resources",
    "tool": "resources",
    "SESSION_COOKIE": "session",
    "forwarded_cookies": "session",
    "session_id": "session",
}

__all__ = [
    "SESSION_COOKIE",
    "AgentServer",
    "BaseServer",
    "HttpClient",
    "JSONResponse",
    "ModelServer",
    "ResourcesServer",
    "RetryPolicy",
    "Timeouts",
    "ToolError",
    "VerifyRequest",
    "build_app",
    "forwarded_cookies",
    "read_generation_request",
    "read_json_object",
    "session_id",
    "tool",
]

__getattr__ = lazy_exports(__name__, _HOMES)
