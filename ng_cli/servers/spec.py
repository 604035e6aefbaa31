"""`ServerSpec`: everything a child process needs to start one server, written by the launcher.

The launcher writes it as JSON to a file with mode 0600 and passes only the file's path on the
command line; the child deletes the file once read. Secrets therefore never reach argv or `ps`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ng_cli.servers.hop import ConnectionLimits

__all__ = ["HEAD_NAME", "ServerAddress", "ServerSpec", "listed_urls", "read_spec", "write_spec"]

HEAD_NAME = "head_server"
"""The head server's name: its config block, and the `server` its answers name. Here, below both the
launcher that plans it and `head.py` that serves it, so neither imports the other for it."""


def listed_urls(listed: Any) -> dict[str, str]:
    """Name -> URL (no trailing slash) of the head's `GET /servers` answer, malformed entries
    skipped: where each server listens now (one re-placed on another Ray node has moved)."""
    entries = listed if isinstance(listed, list) else []
    return {
        entry["name"]: entry["url"].rstrip("/")
        for entry in entries
        if isinstance(entry, dict)
        and isinstance(entry.get("name"), str)
        and isinstance(entry.get("url"), str)
        and entry["url"]
    }


class ServerAddress(BaseModel):
    """Where another server of the stack listens."""

    model_config = ConfigDict(frozen=True)

    server_type: str
    implementation: str
    url: str


class ServerSpec(BaseModel):
    """One server instance, resolved: its config block, its socket and its neighbours."""

    model_config = ConfigDict(frozen=True)

    name: str
    server_type: str
    implementation: str
    app_path: str
    config: dict[str, Any]
    host: str = "127.0.0.1"
    port: int
    listen_fd: int | None = None
    """A listening socket inherited from the launcher, or None to bind host:port here."""
    servers: dict[str, ServerAddress] = {}
    head_url: str | None = None
    session_secret: str
    source: str | None = None
    """The config file the instance came from, for error messages."""
    sources: dict[str, str] = {}
    """Dotted key -> "file:line" of the instance's keys, so errors at start name the key's line."""
    http_limits: ConnectionLimits | None = None
    """The stack's `global_aiohttp_connector_limit*`: the server's HTTP client pool (None: its default)."""

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def write_spec(spec: ServerSpec, path: Path) -> None:
    """Write a spec readable by its owner only (created 0600, never world-readable in between)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(spec.model_dump_json())


def read_spec(path: Path, *, delete: bool = True) -> ServerSpec:
    spec = ServerSpec.model_validate_json(path.read_text())
    if delete:
        path.unlink(missing_ok=True)
    return spec
