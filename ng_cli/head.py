"""The head server: how external processes find a running stack, and the client they use.

    GET /health    {"status": "ok", "server": "head_server"}
    GET /config    the resolved config, secrets masked
    GET /servers   [{"name", "server_type", "kind", "implementation", "url", "pid", "is_ready",
                     "node", "actor"}]   (node and Ray actor: where it runs)
    GET /engines   [{"name", "url", "pid", "node", "actor", "ready_s", ..., "weight_version"?}]  the
                   vLLM engines; `weight_version` (null while out of the pool) for those of a model
                   server that takes weight updates, as that server reports it
    GET /global_config_dict_yaml   NeMo Gym's route: the config as YAML text (a JSON string), each
                   server's block with the host and port it listens on; secrets masked

It runs inside `ng_run` (a uvicorn thread on the socket the launcher bound), so `/servers`
reports the launcher's live view: real pids, and readiness that turns false when a child dies.
`ng_status`, `ng_collect_rollouts` and trainers read it with `fetch_servers` / `fetch_config`.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import uvicorn
import yaml
from fastapi import FastAPI

from ng_cli.errors import InvalidOutputError, UpstreamHTTPError, UpstreamUnavailableError
from ng_cli.servers.app import JSONResponse, build_app
from ng_cli.servers.spec import HEAD_NAME

__all__ = ["HeadServer", "build_head_app", "fetch_config", "fetch_engines", "fetch_servers"]

ServersView = Callable[[], list[dict[str, Any]]]
WeightSources = Callable[[], list[tuple[str, str]]]
"""(model server URL, its admin key) of each model server whose engines take weight updates."""
_VERSIONS_TIMEOUT_S = 2.0


def build_head_app(
    *,
    config: dict[str, Any],
    servers: ServersView,
    engines: ServersView = lambda: [],
    weight_sources: WeightSources = lambda: [],
) -> FastAPI:
    """The head server's app. `config` must already be masked; `servers`/`engines` run per request,
    and `/engines` asks each of `weight_sources` for its engines' versions then."""
    app = build_app(HEAD_NAME)

    @app.get("/config")
    async def get_config() -> JSONResponse:
        return JSONResponse(config)

    @app.get("/servers")
    async def get_servers() -> JSONResponse:
        return JSONResponse(servers())

    @app.get("/engines")
    async def get_engines() -> JSONResponse:
        rows = engines()
        sources = weight_sources()
        if sources:
            versions = await _engine_versions(sources)
            for row in rows:
                root = str(row.get("url") or "").removesuffix("/v1").rstrip("/")
                if root in versions:
                    row["weight_version"] = versions[root]
        return JSONResponse(rows)

    @app.get("/global_config_dict_yaml")
    async def get_global_config_dict_yaml() -> JSONResponse:
        return JSONResponse(yaml.safe_dump(with_addresses(config, servers()), sort_keys=False))

    return app


async def _engine_versions(sources: list[tuple[str, str]]) -> dict[str, int | None]:
    """Engine root URL -> the version its model server says it serves (its `/admin/weights`); a
    server that does not answer within 2 s lists nothing (its engines show no version)."""
    from ng_cli.model_server.admin_paths import ADMIN_ROUTES

    def read(url: str, key: str) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{url.rstrip('/')}{ADMIN_ROUTES['weights']}", headers={"Authorization": f"Bearer {key}"}
        )
        with urllib.request.urlopen(request, timeout=_VERSIONS_TIMEOUT_S) as answer:
            listed = json.loads(answer.read()).get("engine_versions")
        return listed if isinstance(listed, dict) else {}

    answers = await asyncio.gather(
        *(asyncio.to_thread(read, url, key) for url, key in sources), return_exceptions=True
    )
    versions: dict[str, int | None] = {}
    for answer in answers:
        if isinstance(answer, dict):
            versions.update({str(root).rstrip("/"): version for root, version in answer.items()})
    return versions


def with_addresses(config: dict[str, Any], servers: list[dict[str, Any]]) -> dict[str, Any]:
    """The config with every listed server's host and port in its block, where NeMo Gym's clients
    read them (`<name>.<server_type>.<implementation>.host/port`: TRL's multi-environment example
    finds its agents so)."""
    tree = {key: value for key, value in config.items()}
    for entry in servers:
        name, kind, implementation = entry.get("name"), entry.get("server_type"), entry.get("implementation")
        parts = urllib.parse.urlsplit(str(entry.get("url") or ""))
        if not (isinstance(name, str) and isinstance(kind, str) and isinstance(implementation, str)):
            continue
        if parts.hostname is None or parts.port is None:
            continue
        block = dict(tree.get(name, {}).get(kind, {}).get(implementation, {}))
        block.update(host=parts.hostname, port=parts.port)
        tree[name] = {kind: {implementation: block}}
    return tree


class HeadServer:
    """Serves the head app with uvicorn in a background thread, on an already-bound socket."""

    def __init__(self, app: FastAPI, sock: socket.socket) -> None:
        self._sock = sock
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="head-server", daemon=True
        )

    def start(self, *, timeout_s: float = 10.0) -> None:
        """Start serving; returns once uvicorn accepts requests."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise UpstreamUnavailableError("the head server did not start")
            time.sleep(0.002)

    def request_stop(self) -> None:
        self._server.should_exit = True

    def join(self, *, timeout_s: float) -> None:
        """Wait for the server thread to end, then release the port."""
        self.request_stop()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)
        self._sock.close()


def fetch_servers(head_url: str, *, timeout_s: float = 2.0) -> list[dict[str, Any]]:
    """The stack's servers as the head server lists them."""
    servers = _get_json(f"{head_url.rstrip('/')}/servers", timeout_s=timeout_s)
    if not isinstance(servers, list) or not all(
        isinstance(entry, dict) and "url" in entry for entry in servers
    ):
        raise InvalidOutputError(f"{head_url}/servers did not answer a list of servers: {servers!r:.200}")
    return servers


def fetch_engines(head_url: str, *, timeout_s: float = 2.0) -> list[dict[str, Any]]:
    """The stack's vLLM engines (where each runs); empty from a head server that lists none."""
    engines = _get_json(f"{head_url.rstrip('/')}/engines", timeout_s=timeout_s)
    if not isinstance(engines, list) or not all(
        isinstance(entry, dict) and "url" in entry for entry in engines
    ):
        raise InvalidOutputError(f"{head_url}/engines did not answer a list of engines: {engines!r:.200}")
    return engines


def fetch_config(head_url: str, *, timeout_s: float = 2.0) -> dict[str, Any]:
    """The running stack's resolved config, secrets masked."""
    config = _get_json(f"{head_url.rstrip('/')}/config", timeout_s=timeout_s)
    if not isinstance(config, dict):
        raise InvalidOutputError(f"{head_url}/config did not answer a JSON object")
    return config


def _get_json(url: str, *, timeout_s: float) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise UpstreamHTTPError(
            f"the head server answered {exc.code} for {url}", status=exc.code, endpoint=url
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UpstreamUnavailableError(
            f"the head server at {url.rsplit('/', 1)[0]} is unreachable: {reason}",
            endpoint=url,
            hint="is the stack running? start it with ng_run, or point at it with +head_server_url=http://host:port",
        ) from exc
    except json.JSONDecodeError as exc:
        raise InvalidOutputError(f"{url} answered something that is not JSON: {exc}") from exc
