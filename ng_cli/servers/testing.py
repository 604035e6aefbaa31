"""Test support: serve apps on loopback ports in threads, and a scripted model to drive agents.

Real uvicorn, real sockets: the HTTP path under test is the one users run. `serve_in_thread`
follows httpx's; `ScriptedModel` stands in for a model server where a test must decide each
turn's output (tool calls, broken arguments, token ids), and `serve_rollout_stack` wires an
environment, that model and an agent together the way `ng_run` does.
"""

from __future__ import annotations

import inspect
import secrets as _random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from starlette.types import ASGIApp

from ng_cli.config.schema import ServerConfig
from ng_cli.servers.app import JSONResponse, build_app, read_json_object
from ng_cli.servers.base import BaseServer
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.readiness import poll_until, probe_health
from ng_cli.servers.spec import ServerAddress, ServerSpec, write_spec

__all__ = [
    "AgentStack",
    "ChildServer",
    "Policy",
    "RolloutStack",
    "ScriptedModel",
    "assistant_message",
    "function_call",
    "scripted_model_app",
    "serve_agent",
    "serve_in_child",
    "serve_in_thread",
    "serve_rollout_stack",
    "tool_outputs",
    "validated_configs",
]


@contextmanager
def serve_in_thread(app: ASGIApp, *, startup_timeout_s: float = 120.0) -> Iterator[str]:
    """Yield the base URL (`http://127.0.0.1:<port>`) of `app` served by uvicorn in a thread.

    `startup_timeout_s` only caps a lifespan that hangs: an app's start-up work (a judge's or a
    verifier's imports) took over 10 s on 2 cores under other load, failing tests that are fine."""
    sock = socket.socket(
        socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP
    )  # asyncio sets TCP_NODELAY only then
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=30,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()

    def thread_alive() -> None:
        if not thread.is_alive():
            raise RuntimeError("uvicorn's thread ended before the app started (its lifespan failed?)")

    if not poll_until(
        lambda: server.started, timeout_s=startup_timeout_s, check=thread_alive, max_retry_s=0.01
    ):
        raise RuntimeError(f"uvicorn did not start within {startup_timeout_s:g} s")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


# ---------------------------------------------------------------------------------------------
# A scripted Responses-API model, and a whole rollout stack on loopback
# ---------------------------------------------------------------------------------------------

PolicyResult = list[dict[str, Any]] | dict[str, Any]
Policy = Callable[[dict[str, Any]], PolicyResult | Awaitable[PolicyResult]]
"""request body -> output items, or a dict of Response fields (e.g. `status: incomplete`)
laid over the default completed Response. Raising an NgError answers with its status. An async
policy can stand in for a model's latency (`await asyncio.sleep(...)`) without blocking others."""


class ScriptedModel:
    """A stand-in model server: answers `POST /v1/responses` with what a test's policy computes.

    It records every request body and every response it sent, so tests can assert on what the
    agent sent back (token-id fields, tool outputs) and on summed usage.
    """

    def __init__(self, policy: Policy, *, name: str = "scripted_model") -> None:
        self.policy = policy
        self.name = name
        self.requests: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def build_app(self) -> FastAPI:
        app = build_app(self.name)
        app.state.model = self

        @app.post("/v1/responses")
        async def responses(request: Request) -> JSONResponse:
            body = await read_json_object(request)
            with self._lock:
                self.requests.append(body)
            result = self.policy(body)
            if inspect.isawaitable(result):
                result = await result
            response = _scripted_response(body, result)
            with self._lock:
                self.responses.append(response)
            return JSONResponse(response)

        return app


def scripted_model_app(policy: Policy) -> FastAPI:
    """A FastAPI app answering `POST /v1/responses` from `policy`; `app.state.model` records calls."""
    return ScriptedModel(policy).build_app()


def _scripted_response(body: dict[str, Any], result: PolicyResult) -> dict[str, Any]:
    fields = {"output": result} if isinstance(result, list) else dict(result)
    output = fields.get("output", [])
    input_tokens = len(orjson.dumps(body.get("input"))) // 4
    output_tokens = len(orjson.dumps(output)) // 4
    default = {
        "id": f"resp_{uuid.uuid4().hex[:12]}",
        "object": "response",
        "created_at": int(time.time()),
        "model": body.get("model") or "scripted",
        "status": "completed",
        "output": output,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
        "tools": body.get("tools") or [],
    }
    return {**default, **fields}


def function_call(name: str, arguments: Mapping[str, Any] | str, **extra: Any) -> dict[str, Any]:
    """A `function_call` output item; a str `arguments` is sent verbatim (e.g. broken JSON)."""
    raw = arguments if isinstance(arguments, str) else orjson.dumps(dict(arguments)).decode()
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    item = {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": raw,
    }
    return {**item, "status": "completed", **extra}


def assistant_message(text: str, **extra: Any) -> dict[str, Any]:
    """An assistant `message` output item with one `output_text` part."""
    content = [{"type": "output_text", "text": text, "annotations": []}]
    item = {"type": "message", "id": f"msg_{uuid.uuid4().hex[:12]}", "role": "assistant", "content": content}
    return {**item, "status": "completed", **extra}


def tool_outputs(request: Mapping[str, Any]) -> list[Any]:
    """The decoded outputs of every `function_call_output` item in a request's input, in order."""
    items = request.get("input")
    if not isinstance(items, list):
        return []
    return [
        orjson.loads(item["output"])
        for item in items
        if isinstance(item, Mapping) and item.get("type") == "function_call_output"
    ]


@dataclass
class AgentStack:
    """An agent and the scripted model it talks to, each served on loopback."""

    agent_url: str
    model_url: str
    agent: BaseServer[Any]
    model: ScriptedModel


@dataclass
class RolloutStack:
    """A resources server, a scripted model and an agent, each served on loopback."""

    agent_url: str
    resources_url: str
    model_url: str
    agent: BaseServer[Any]
    resources: BaseServer[Any]
    model: ScriptedModel


@contextmanager
def serve_agent(
    agent_class: type[BaseServer[Any]],
    policy: Policy,
    *,
    resources_url: str,
    resources_server_type: str,
    resources_name: str,
    session_secret: str,
    agent_config: Mapping[str, Any] | None = None,
    model_name: str = "policy_model",
) -> Iterator[AgentStack]:
    """Serve a scripted model and an agent wired to it and to the resources server at
    `resources_url` (in a thread, or a `serve_in_child` process sharing `session_secret`)."""
    model = ScriptedModel(policy)
    with serve_in_thread(model.build_app()) as model_url:
        block = {
            "resources_server": {"type": resources_server_type, "name": resources_name},
            "model_server": {"type": "responses_api_models", "name": model_name},
            **dict(agent_config or {}),
        }
        servers = {
            resources_name: ServerAddress(
                server_type=resources_server_type, implementation=resources_name, url=resources_url
            ),
            model_name: ServerAddress(
                server_type="responses_api_models", implementation="scripted", url=model_url
            ),
        }
        agent = agent_class(
            agent_class.config_class.model_validate(block),
            name="agent",
            servers=servers,
            session_secret=session_secret,
        )
        with serve_in_thread(agent.build_app()) as agent_url:
            yield AgentStack(agent_url, model_url, agent, model)


@contextmanager
def serve_rollout_stack(
    resources_class: type[BaseServer[Any]],
    agent_class: type[BaseServer[Any]],
    policy: Policy,
    *,
    resources_config: Mapping[str, Any] | None = None,
    agent_config: Mapping[str, Any] | None = None,
    resources_name: str = "env",
    model_name: str = "policy_model",
) -> Iterator[RolloutStack]:
    """Serve an environment, a scripted model and an agent wired to both (one session secret)."""
    secret = _random.token_hex(16)  # shared, as ng_run does: every hop must accept the cookie
    resources = resources_class(
        resources_class.validate_config(dict(resources_config or {}), instance=resources_name),
        name=resources_name,
        session_secret=secret,
    )
    with (
        serve_in_thread(resources.build_app()) as resources_url,
        serve_agent(
            agent_class,
            policy,
            resources_url=resources_url,
            resources_server_type=resources_class.server_type,
            resources_name=resources_name,
            session_secret=secret,
            agent_config=agent_config,
            model_name=model_name,
        ) as served,
    ):
        yield RolloutStack(
            served.agent_url, resources_url, served.model_url, served.agent, resources, served.model
        )


def validated_configs(config_path: Path, *overrides: str) -> dict[str, ServerConfig]:
    """Compose one config file (plus overrides) as `ng_run` would, and validate every instance the
    file declares with its own server class. Raises ConfigError on any problem.

    Overrides can stand in for the instances the file refers to but does not declare, e.g.
    `++policy_model.responses_api_models.vllm_model.entrypoint=app.py`; those are not validated.
    """
    from ng_cli.config.compose import compose_config
    from ng_cli.config.paths import implementation_dir, repo_root

    root = repo_root()
    relative = config_path.resolve().relative_to(root)
    composed = compose_config([f"+config_paths=[{relative}]", *overrides], cwd=root)
    configs: dict[str, ServerConfig] = {}
    for name, instance in composed.instances.items():
        if not (instance.source or "").startswith(f"{relative}:"):
            continue
        entrypoint = instance.block.get("entrypoint", "app.py")
        server_class = load_server_class(
            implementation_dir(instance.server_type, instance.implementation) / entrypoint
        )
        configs[name] = server_class.validate_config(instance.block, instance=name, source=instance.source)
    return configs


@dataclass(frozen=True)
class ChildServer:
    """A server running as its own process, started the way ng_run starts one."""

    url: str
    process: subprocess.Popen[bytes]
    session_secret: str
    """The secret of its session cookies: an agent serving with it can use this server."""

    def post(self, path: str, body: Mapping[str, Any], *, timeout_s: float = 60.0) -> dict[str, Any]:
        """POST JSON and return the JSON answer (blocking: for tests outside an event loop)."""
        request = urllib.request.Request(
            f"{self.url}{path}", data=orjson.dumps(body), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return dict(orjson.loads(answer.read()))


@contextmanager
def serve_in_child(
    app_path: Path,
    config: Mapping[str, Any],
    *,
    name: str,
    spec_dir: Path,
    ready_timeout_s: float = 60.0,
    session_secret: str | None = None,
    servers: Mapping[str, ServerAddress] | None = None,
) -> Iterator[ChildServer]:
    """Run `python -m ng_cli.servers.child` on an inherited loopback socket; stop it afterwards.
    With `servers` (its neighbours), its own address is added to them, as ng_run lists every
    server to every server (NeMo Gym's agents call themselves by name)."""
    secret = session_secret or _random.token_hex(16)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.set_inheritable(True)
    port = listener.getsockname()[1]
    server_type, implementation = app_path.parent.parent.name, app_path.parent.name
    neighbours = dict(servers or {})
    if neighbours:
        own = ServerAddress(
            server_type=server_type, implementation=implementation, url=f"http://127.0.0.1:{port}"
        )
        neighbours[name] = own
    spec = ServerSpec(
        name=name,
        server_type=server_type,
        implementation=implementation,
        app_path=str(app_path),
        config=dict(config),
        port=port,
        listen_fd=listener.fileno(),
        session_secret=secret,
        servers=neighbours,
    )
    spec_path = spec_dir / f"{name}.spec.json"
    write_spec(spec, spec_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "ng_cli.servers.child", str(spec_path)], pass_fds=(listener.fileno(),)
    )
    listener.close()
    try:
        server = ChildServer(url=f"http://127.0.0.1:{port}", process=process, session_secret=secret)
        _wait_for_health(server, timeout_s=ready_timeout_s)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=30)


def _wait_for_health(server: ChildServer, *, timeout_s: float) -> None:
    def running() -> None:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"the server process exited with code {server.process.returncode} before it was ready"
            )

    if not poll_until(lambda: probe_health(server.url, timeout_s=1.0), timeout_s=timeout_s, check=running):
        raise RuntimeError(f"the server did not answer {server.url}/health within {timeout_s:g} s")
