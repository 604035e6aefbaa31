"""`Stack`: the running processes of one plan — bind, spawn, wait for health, watch, stop.

    Stack.start(plan)   bind every port, write 0600 specs, spawn children (one process group),
                        then serve the head server inside this process; with engines in the
                        plan, spawn those first and the servers only once they serve
    wait_ready()        engines serve their model (`launcher.engines`), then every /health
                        answers, or LaunchError (with the dead child's last lines)
    watch()             returns when asked to stop; raises LaunchError when a server dies, or an
                        engine dies past its restart budget (earlier deaths restart it)
    check_alive()       watch's check once, for callers with their own loop
    stop()              SIGTERM to the group, SIGKILL after the grace period, reap, close, clean

`stop()` is idempotent and safe to call from `finally` at any point of `start()`.

With a `RayBackend` (the plan has a `ray` block) the same steps place the engines' groups first,
let the server actors bind on their nodes, and start engines and those servers through their
actors; `stop()` then also removes every actor and placement group this stack created.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ng_cli.engines.plan import EngineSpec, InstanceEngines
from ng_cli.errors import LaunchError
from ng_cli.launcher.admin_keys import remove_admin_keys, write_admin_keys
from ng_cli.launcher.engines import EngineFleet, NotPlacedYet
from ng_cli.launcher.health import (
    ExitedBeforeReadyError,
    NotReadyError,
    Target,
    wait_until_ready,
)
from ng_cli.launcher.plan import ServerPlan, StackPlan
from ng_cli.launcher.ports import bind_listener
from ng_cli.launcher.process import (
    Child,
    ConsoleSink,
    Handle,
    LineSink,
    group_exists,
    signal_groups,
    spawn_child,
    tail_text,
)
from ng_cli.model_server.admin_paths import ADMIN_ROUTES
from ng_cli.outputs import write_bytes_atomically
from ng_cli.servers.readiness import probe_health
from ng_cli.servers.spec import write_spec

if TYPE_CHECKING:
    from ng_cli.head import HeadServer
    from ng_cli.launcher.ray.backend import RayBackend

__all__ = ["STOP_TIMEOUT_S", "Stack", "make_run_dir"]

STOP_TIMEOUT_S = 5.0
"""Everything is gone this long after `stop()` starts, whatever the children do."""
_TERM_GRACE_S = 3.0
"""Time between SIGTERM and SIGKILL; children shut down gracefully within 2 s (uvicorn)."""


def make_run_dir() -> Path:
    """A private (0700) directory for one stack's spec files."""
    return Path(tempfile.mkdtemp(prefix="ng_run-"))


class Stack:
    """The processes of one `StackPlan`. Build it with `Stack.start(plan)`."""

    def __init__(
        self, plan: StackPlan, *, sink: LineSink | None = None, backend: RayBackend | None = None
    ) -> None:
        self.plan = plan
        self.backend = backend
        """The Ray cluster the engines and actor servers run on; None: everything is a local child."""
        self.sink = sink or ConsoleSink()
        self.redactor = plan.redactor()
        """Hides every secret of the stack in the children's relayed output and death reports."""
        self.children: dict[str, Handle] = {}
        self.ready_s: dict[str, float] = {}
        self.head: HeadServer | None = None
        self.engines = EngineFleet((), sink=self.sink)
        self._sockets: dict[str, socket.socket] = {}
        self._engine_sockets: dict[int, socket.socket] = {}
        """Port -> the socket that holds it for an engine until that engine is spawned."""
        self._pgids: set[int] = set()
        self._started = time.monotonic()
        self._stopped = False
        self._planned_hosts: dict[str, str] = {}
        """Server actors' hosts as configured (a lost one binds on its new node the same way)."""
        self._recovering: dict[str, float] = {}
        """Server actors restarted after their node was lost -> when it was found lost."""
        self._lost: dict[str, tuple[float, Handle]] = {}
        """Server actors whose node was lost and that wait for room -> (found lost at, the dead child)."""
        self._server_restarts: dict[str, int] = {}

    @classmethod
    def start(
        cls, plan: StackPlan, *, sink: LineSink | None = None, backend: RayBackend | None = None
    ) -> Stack:
        """Bind, spawn and serve; on any failure, everything started so far is stopped."""
        stack = cls(plan, sink=sink, backend=backend)
        try:
            stack._bind()
            if backend is not None:
                stack._place(backend)
            if stack.plan.engines:
                stack._spawn_engines()  # the servers follow once the engines serve (wait_ready)
            else:
                stack._spawn_children()
            stack._serve_head()
            keys = stack._admin_keys()
            write_admin_keys(
                stack.plan.head.url,
                keys,
                {server.name: server.url for server in stack.plan.servers if server.name in keys},
            )
        except BaseException:
            stack.stop()
            raise
        return stack

    def wait_ready(self, *, should_stop: Callable[[], bool] = lambda: False) -> dict[str, float]:
        """Seconds from start to ready for the head, engines and servers; LaunchError if one fails."""
        if self.engines and not self.children:
            self.ready_s.update(self.engines.wait_ready(should_stop=should_stop))
            self.plan = self.plan.with_engines(self.engines.placed_plans())  # where they really serve
            self._spawn_children()
        targets = {
            name: Target(name=name, url=self.plan.server(name.split("#")[0]).url, exit_code=child.exit_code)
            for name, child in self.children.items()
        }
        try:
            wait_until_ready(
                targets,
                timeout_s=self.plan.ready_timeout_s,
                should_stop=should_stop,
                on_ready=self._mark_ready,
            )
        except ExitedBeforeReadyError as error:
            raise self._death_error(self.children[error.name], before_ready=True) from None
        except NotReadyError as error:
            raise LaunchError(
                f"{error.message}{self._tail_text(self.children[error.name])}", hint=error.hint
            ) from None
        return dict(self.ready_s)

    def watch(self, *, should_stop: Callable[[], bool], poll_s: float = 0.05) -> None:
        """Block until `should_stop()`; raise LaunchError as soon as any child ends."""
        while not should_stop():
            self.check_alive()
            time.sleep(poll_s)

    def check_alive(self) -> None:
        """Raise LaunchError (naming it, its exit code and last lines) if a server has ended;
        restart a dead engine, or raise once its restart budget is spent. On Ray, a server actor
        whose node was lost is restarted on another node instead (`ray.server_max_restarts`)."""
        for name, child in list(self.children.items()):
            if child.exit_code() is not None and name not in self._lost:
                if not getattr(child, "node_lost", False):
                    raise self._death_error(child, before_ready=False)
                self._lost[name] = (time.monotonic(), child)
                self.ready_s.pop(name, None)
                self.sink("ng_run", f"server '{name}' lost: {child.describe_end(child.exit_code() or 0)}")
        for name in list(self._lost):
            self._replace_server(name)
        for name in list(self._recovering):
            self._check_recovered(name)
        self.engines.poll()

    def _replace_server(self, name: str) -> None:
        """A new actor for a server on a lost node (once a node has room), then its child."""
        assert self.backend is not None
        assert self.plan.placement is not None
        lost_at, dead = self._lost[name]
        done = self._server_restarts.get(name, 0)
        limit = self.plan.ray.server_max_restarts if self.plan.ray is not None else 0
        if done >= limit:
            raise LaunchError(
                f"server '{name}' (pid {dead.pid}) exited while the stack was running, after {done} "
                f"restart(s) (ray.server_max_restarts {limit}): {dead.describe_end(dead.exit_code() or 0)}"
                f"{self._tail_text(dead)}",
                hint="the lines above are its last output",
            )
        server = self.plan.server(name)
        cpus = self.plan.placement.server_cpus[name]
        try:
            address = self.backend.replace_server(name, self._planned_hosts[name], server.port, cpus)
        except NotPlacedYet:
            return  # no room yet: the backend says so every 10 s, and stops past ray.capacity_wait_s
        self._server_restarts[name] = done + 1
        del self._lost[name]
        self.plan = self.plan.with_addresses({name: address})
        spec = self.plan.spec_for(name, listen_fd=None)
        self.children[name] = self.backend.start_server(
            name, self.plan.server(name).command, spec.model_dump(), sink=self.sink, redact=self.redactor.text
        )
        self._recovering[name] = lost_at
        self.sink(
            "ng_run",
            f"server '{name}' restarted on {self.children[name].location().get('node_id')} at "
            f"{self.plan.server(name).url} (restart {done + 1} of {limit})",
        )

    def _check_recovered(self, name: str) -> None:
        if probe_health(self.plan.server(name).url, timeout_s=0.25):
            lost_at = self._recovering.pop(name)
            self.ready_s[name] = time.monotonic() - self._started
            self.sink(
                "ng_run",
                f"server '{name}' is serving again at {self.plan.server(name).url} "
                f"({time.monotonic() - lost_at:.1f} s after its node was lost)",
            )

    def stop(self, *, force: bool = False, hurry: Callable[[], bool] = lambda: False) -> None:
        """Stop every child within STOP_TIMEOUT_S: SIGTERM, then SIGKILL; reap; close; clean up.

        `force` skips SIGTERM; `hurry()` turning true (a second Ctrl-C) cuts the grace period short.
        """
        if self._stopped:
            return
        self._stopped = True
        self.engines.stop_restarting()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        if self.head is not None:
            self.head.request_stop()
        self._terminate(force=force, hurry=hurry, deadline=deadline)
        if self.backend is not None:
            said = self.backend.stop(grace_s=0.0 if force or hurry() else _TERM_GRACE_S - 1.0)
            if said:
                self.sink("ng_run", said)
        if self.head is not None:
            self.head.join(timeout_s=max(0.1, deadline - time.monotonic()))
        for sock in [*self._sockets.values(), *self._engine_sockets.values()]:
            sock.close()
        for child in self._all_children():
            child.wait(max(0.0, min(0.5, deadline - time.monotonic())))
        shutil.rmtree(self.plan.run_dir, ignore_errors=True)
        if any(engines.weight_updates for engines in self.plan.engines):
            remove_admin_keys(self.plan.head.url)

    def servers_status(self) -> list[dict[str, Any]]:
        """What the head server's `/servers` answers: one entry per server instance, then one per
        environment server relay (NeMo Gym's legacy_agent), with its agent's URL and state."""
        servers = [
            {
                "name": server.name,
                "server_type": server.server_type,
                "kind": server.kind,
                "implementation": server.implementation,
                "url": server.url,
                "pid": self.children[server.name].pid if server.name in self.children else None,
                **(self.children[server.name].location() if server.name in self.children else {}),
                "is_ready": server.name in self.ready_s and self._is_running(server.name),
                **({"worker_pids": self._worker_pids(server)} if server.workers > 1 else {}),
                **({"admin": ADMIN_ROUTES} if self._takes_weight_updates(server.name) else {}),
            }
            for server in self.plan.servers
        ]
        by_name = {entry["name"]: entry for entry in servers}
        relays = [
            {
                **by_name[relay.agent],
                "name": name,
                "server_type": "environment_servers",
                "kind": "relay",
                "implementation": "legacy_agent",
                "relays_to": relay.agent,
            }
            for name, relay in self.plan.relays.items()
            if relay.agent in by_name
        ]
        return servers + relays

    def write_ready_file(self, path: Path) -> None:
        """Write the stack's addresses and pids as JSON, atomically (for scripts and tests)."""
        payload = {
            "pid": os.getpid(),
            "head_url": self.plan.head.url,
            "run_dir": str(self.plan.run_dir),
            "ready_s": self.ready_s,
            "servers": self.servers_status(),
            "engines": self.engines.rows(),
        }
        if self.plan.placement is not None:
            payload["ray"] = {
                "run_id": self.plan.placement.run_id,
                "placement_groups": [group.name for group in self.plan.placement.groups],
            }
        write_bytes_atomically(path, json.dumps(payload, indent=2).encode())

    def _bind(self) -> None:
        for process in self.plan.processes:
            if self.backend is None or not self.plan.is_actor(process.name):  # actors bind on their node
                self._sockets[process.name] = bind_listener(process.host, process.port, owner=process.name)
        self.plan = self.plan.with_ports(
            {name: sock.getsockname()[1] for name, sock in self._sockets.items()}
        )
        if self.backend is None:  # on Ray each engine's actor picks ports free on its node
            self.plan = self.plan.with_engines(
                tuple(self._pick_engine_ports(plan) for plan in self.plan.engines)
            )

    def _place(self, backend: RayBackend) -> None:
        """Reserve the engines' placement groups; let the server actors bind and report where."""
        assert self.plan.placement is not None
        backend.say = lambda line: self.sink("ng_run", line)
        backend.place(self.plan.placement)
        self._planned_hosts = {name: self.plan.server(name).host for name in self.plan.placement.server_cpus}
        addresses = {
            name: backend.listen(name, self.plan.server(name).host, self.plan.server(name).port, cpus)
            for name, cpus in self.plan.placement.server_cpus.items()
        }
        self.plan = self.plan.with_addresses(addresses)

    def _pick_engine_ports(self, plan: InstanceEngines) -> InstanceEngines:
        """Free ports for the engines; held until they spawn (vLLM binds its own, we cannot pass a socket)."""
        host = plan.engines[0].host if plan.engines else "127.0.0.1"
        http, rpc = plan.ports_needed()
        held = [bind_listener(host, 0, owner=f"{plan.instance} engines") for _ in range(http + rpc)]
        ports = [sock.getsockname()[1] for sock in held]
        self._engine_sockets.update(zip(ports, held, strict=True))
        return plan.with_ports(ports[:http], ports[http:])

    def _spawn_engines(self) -> None:
        starter = self.backend.start_engine if self.backend is not None else None
        if self.backend is not None:
            self.plan = self.plan.with_engines(tuple(self._followed(plan) for plan in self.plan.engines))
        self.engines = EngineFleet(
            self.plan.engines,
            sink=self.sink,
            starter=starter,
            redact=self.redactor.text,
            before_spawn=self._release_engine_ports,
        )
        self.engines.start()

    def _followed(self, plan: InstanceEngines) -> InstanceEngines:
        """On Ray, an endpoint file for the model server (when it runs on ng_run's node, where the
        file is): an engine re-placed on another node serves at a new URL, and the server follows."""
        server = self.plan.server(plan.instance)
        on_our_node = not self.plan.is_actor(server.name) or server.host in ("127.0.0.1", "localhost", "::1")
        if not on_our_node:
            return plan
        return replace(plan, endpoint_file=str(self.plan.run_dir / f"{plan.instance}.endpoints"))

    def _release_engine_ports(self, spec: EngineSpec) -> None:
        """Close what held an engine's ports right before it binds them (a deferred engine's stay held)."""
        for port in (spec.port, spec.rpc_port):
            sock = self._engine_sockets.pop(port, None) if port else None
            if sock is not None:
                sock.close()

    def _all_children(self) -> list[Handle]:
        return [*self.children.values(), *self.engines.children]

    def _spawn_children(self) -> None:
        pgid: int | None = None
        for server in self.plan.servers:
            if self.backend is not None and self.plan.is_actor(server.name):
                spec = self.plan.spec_for(server.name, listen_fd=None)  # the actor fills in its socket
                self.children[server.name] = self.backend.start_server(
                    server.name, server.command, spec.model_dump(), sink=self.sink, redact=self.redactor.text
                )
                continue
            sock = self._sockets.pop(server.name)
            try:
                for worker in range(server.workers):  # workers share the socket: pre-fork style
                    spec_path = server.worker_spec_path(worker)
                    write_spec(self.plan.spec_for(server.name, listen_fd=sock.fileno()), spec_path)
                    name = server.worker_name(worker)
                    child = self._spawn(name, (*server.command[:-1], str(spec_path)), sock, pgid)
                    self.children[name] = child
                    self._pgids.add(child.pgid)
                    pgid = child.pgid
            finally:
                # The children hold their own copies; ours would keep the port open after a crash.
                sock.close()

    def _spawn(self, name: str, command: tuple[str, ...], sock: socket.socket, pgid: int | None) -> Child:
        try:
            return spawn_child(
                name, command, pass_fds=[sock.fileno()], pgid=pgid, sink=self.sink, redact=self.redactor.text
            )
        except PermissionError:
            if pgid is None:
                raise
            # setpgid refused: every member of the group has exited already. Lead a new group;
            # stop() signals every group the stack has.
            return spawn_child(
                name, command, pass_fds=[sock.fileno()], pgid=None, sink=self.sink, redact=self.redactor.text
            )

    def _serve_head(self) -> None:
        from ng_cli.head import HeadServer, build_head_app  # fastapi loads while the children start

        app = build_head_app(
            config=self.plan.masked_config,
            servers=self.servers_status,
            engines=lambda: self.engines.rows(),
            weight_sources=self._weight_sources,
        )
        self.head = HeadServer(app, self._sockets.pop(self.plan.head.name))
        self.head.start()
        self.ready_s[self.plan.head.name] = time.monotonic() - self._started

    def _weight_sources(self) -> list[tuple[str, str]]:
        """(URL, admin key) of each model server over engines ng_run starts that take weight updates
        (the head's `/engines` asks them each engine's version)."""
        keys = {engines.instance: engines.api_key for engines in self.plan.engines if engines.weight_updates}
        return [(server.url, keys[server.name]) for server in self.plan.servers if server.name in keys]

    def _takes_weight_updates(self, name: str) -> bool:
        return name in self._admin_keys()

    def _admin_keys(self) -> dict[str, str]:
        """instance -> the key of its admin routes, for each model server that takes weight updates:
        over the engines ng_run starts (their key), or over engines at a `base_url` (its api_key)."""
        keys = {engines.instance: engines.api_key for engines in self.plan.engines if engines.weight_updates}
        for server in self.plan.servers:
            at_base_url = self.plan.engines_of(server.name) is None and server.config.get("base_url")
            if server.name not in keys and at_base_url and server.config.get("weight_updates") is True:
                keys[server.name] = str(server.config.get("api_key") or "")
        return keys

    def _worker_pids(self, server: ServerPlan) -> list[int]:
        names = (server.worker_name(worker) for worker in range(server.workers))
        return [self.children[name].pid for name in names if name in self.children]

    def _mark_ready(self, name: str, _seconds: float) -> None:
        self.ready_s[name] = time.monotonic() - self._started

    def _is_running(self, name: str) -> bool:
        child = self.children.get(name)
        return child is not None and child.exit_code() is None

    def _terminate(self, *, force: bool, hurry: Callable[[], bool], deadline: float) -> None:
        """The local children; Ray's are the backend's to stop."""
        local = [child for child in self._all_children() if isinstance(child, Child)]
        running = [child for child in local if child.exit_code() is None]
        pgids = self._pgids | self.engines.pgids
        signal_groups(pgids, signal.SIGKILL if force else signal.SIGTERM)
        kill_at = min(deadline - 0.5, time.monotonic() + _TERM_GRACE_S)
        while running and time.monotonic() < kill_at and not hurry():
            running = [child for child in running if child.exit_code() is None]
            time.sleep(0.02)
        # SIGKILL whatever is left in the groups, children's own children included.
        signal_groups({pgid for pgid in pgids if group_exists(pgid)}, signal.SIGKILL)
        for child in local:
            try:
                child.process.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:  # unkillable (D state): nothing more to do than SIGKILL
                continue

    def _death_error(self, child: Handle, *, before_ready: bool) -> LaunchError:
        child.wait(1.0)  # let the last lines arrive
        code = child.exit_code()
        status = child.describe_end(code) if code is not None else "no exit status"
        when = "before it was ready" if before_ready else "while the stack was running"
        return LaunchError(
            f"server '{child.name}' (pid {child.pid}) exited {when}: {status}{self._tail_text(child)}",
            hint="the lines above are its last output; fix the cause, then rerun ng_run",
        )

    @staticmethod
    def _tail_text(child: Handle) -> str:
        return tail_text(child.name, child)
