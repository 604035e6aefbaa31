"""`plan_stack()`: a composed config -> `StackPlan`, the exact intention of `ng_run`, before any I/O.

The plan names every process (the head server and one child per server instance), its app,
its address and the `ServerSpec` it will read. Ports set to 0 are "any free port": the launcher
binds them (`ports.py`) and fills them in with `StackPlan.with_ports` before any child starts,
so every spec can carry every neighbour's URL and no discovery round-trip is needed.
Pure and printable: `ng_run +dry_run=true` shows it, unit tests check it.
"""

from __future__ import annotations

import math
import os
import secrets as _random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.environments import EnvironmentRelay
from ng_cli.config.http_client_options import read_http_client_options
from ng_cli.config.instances import ServerInstance
from ng_cli.config.paths import display_path, implementation_dir
from ng_cli.config.schema import validate_block
from ng_cli.config.secrets import Redactor, mask, secret_values
from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.placement import PlacementPlan, plan_placement
from ng_cli.engines.plan import InstanceEngines, plan_engines, visible_devices
from ng_cli.errors import ConfigError
from ng_cli.launcher.ports import connect_host
from ng_cli.launcher.ray.config import RayConfig, read_ray_config
from ng_cli.servers.hop import ConnectionLimits
from ng_cli.servers.spec import HEAD_NAME, ServerAddress, ServerSpec
from ng_cli.toolchain.local_vllm import default_engine_python

__all__ = [
    "CHILD_MODULE",
    "DEFAULT_HEAD_PORT",
    "DEFAULT_HOST",
    "DEFAULT_READY_TIMEOUT_S",
    "HEAD_NAME",
    "ServerPlan",
    "StackPlan",
    "engine_plans",
    "head_url_from_config",
    "http_limits",
    "instance_sources",
    "plan_stack",
    "read_seconds",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_HEAD_PORT = 11000
DEFAULT_READY_TIMEOUT_S = 60.0
CHILD_MODULE = "ng_cli.servers.child"

_KINDS = {"resources_servers": "resources", "responses_api_models": "model", "responses_api_agents": "agent"}
LOCAL_ENGINES_IMPLEMENTATION = "local_vllm_model"
"""Model servers of this implementation get engines that ng_run starts (unless they name a base_url)."""


@dataclass(frozen=True)
class ServerPlan:
    """One process of the stack: what runs, where it listens, and how it is started."""

    name: str
    kind: str
    """Short label: head, resources, model or agent."""
    server_type: str
    implementation: str
    app_path: Path | None
    """The implementation's entry point; None for the head server (it runs inside ng_run)."""
    host: str
    port: int
    """0 until the launcher has bound a free port."""
    config: dict[str, Any] = field(repr=False)
    """The instance block, secrets included: it goes only into the 0600 spec file."""
    source: str | None = None
    sources: dict[str, str] = field(default_factory=dict, repr=False)
    """Dotted key -> "file:line" of the instance's keys (for errors at start)."""
    spec_path: Path | None = None
    command: tuple[str, ...] = ()
    """The child's argv (the spec path only, never config or secrets); empty for the head."""
    workers: int = 1
    """Processes that serve this instance on its one socket (agents only: `num_workers`)."""

    def worker_spec_path(self, worker: int) -> Path:
        """Each worker reads (and deletes) a spec file of its own."""
        assert self.spec_path is not None
        return self.spec_path if worker == 0 else self.spec_path.with_name(f"{self.name}.w{worker}.spec.json")

    def worker_name(self, worker: int) -> str:
        """`name` for the first worker, `name#i` for the others (their log prefix)."""
        return self.name if worker == 0 else f"{self.name}#{worker}"

    @property
    def url(self) -> str:
        """The base URL clients use; the port must be known."""
        if self.port == 0:
            raise ValueError(f"the port of '{self.name}' is not bound yet")
        host = connect_host(self.host)
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    @property
    def address(self) -> str:
        """host:port, with `auto` for a port the launcher will pick."""
        return f"{self.host}:{self.port or 'auto'}"


@dataclass(frozen=True)
class StackPlan:
    """The head server plus every server instance, with the secret they share."""

    head: ServerPlan
    servers: tuple[ServerPlan, ...]
    run_dir: Path
    """Private (0700) directory for the spec files."""
    session_secret: str = field(repr=False)
    masked_config: dict[str, Any] = field(repr=False, default_factory=dict)
    """The resolved config with secrets masked: what the head server's /config answers."""
    secrets: frozenset[str] = field(repr=False, default=frozenset())
    """Every secret value of the resolved config, also found under keys that do not look secret
    (`X-Custom-Auth: ${policy_api_key}`); see `redactor`."""
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    engines: tuple[InstanceEngines, ...] = ()
    """The vLLM engines to start before the servers, per local_vllm_model instance."""
    relays: dict[str, EnvironmentRelay] = field(default_factory=dict)
    """NeMo Gym environment servers (legacy_agent relays) by name, each served by its agent."""
    ray: RayConfig | None = None
    """Set: the engines (and the servers `ray.servers` names) run as actors on this Ray cluster."""
    placement: PlacementPlan | None = None
    """With `ray`: the placement groups of the engines and the server actors' CPUs."""
    http_limits: ConnectionLimits | None = None
    """`global_aiohttp_connector_limit*`: every server's HTTP client pool (None: each its default)."""

    def redactor(self) -> Redactor:
        """Hides every secret of the stack: the config's, each server's, the engines' api keys."""
        return Redactor(
            [
                *self.secrets,
                *(value for server in self.servers for value in secret_values(server.config)),
                *(engines.api_key for engines in self.engines),
            ]
        )

    def is_actor(self, name: str) -> bool:
        """True for a server instance that runs as a Ray actor."""
        return self.placement is not None and name in self.placement.server_cpus

    @property
    def processes(self) -> tuple[ServerPlan, ...]:
        return (self.head, *self.servers)

    @property
    def is_bound(self) -> bool:
        return all(process.port != 0 for process in self.processes)

    def server(self, name: str) -> ServerPlan:
        for process in self.processes:
            if process.name == name:
                return process
        raise KeyError(name)

    def with_ports(self, ports: Mapping[str, int]) -> StackPlan:
        """The same plan with the given bound ports filled in (by process name)."""
        head = replace(self.head, port=ports.get(self.head.name, self.head.port))
        servers = tuple(replace(server, port=ports.get(server.name, server.port)) for server in self.servers)
        return replace(self, head=head, servers=servers)

    def with_addresses(self, addresses: Mapping[str, tuple[str, int]]) -> StackPlan:
        """The same plan with the given servers at (host, port): Ray actors bind on their own node."""
        servers = tuple(
            replace(server, host=addresses[server.name][0], port=addresses[server.name][1])
            if server.name in addresses
            else server
            for server in self.servers
        )
        return replace(self, servers=servers)

    def with_engines(self, engines: tuple[InstanceEngines, ...]) -> StackPlan:
        """The same plan with the engines' picked ports filled in."""
        return replace(self, engines=engines)

    def engines_of(self, name: str) -> InstanceEngines | None:
        return next((plan for plan in self.engines if plan.instance == name), None)

    def addresses(self) -> dict[str, ServerAddress]:
        """Every instance's URL, as each child's spec carries it."""
        return {
            server.name: ServerAddress(
                server_type=server.server_type, implementation=server.implementation, url=server.url
            )
            for server in self.servers
        }

    def spec_for(self, name: str, *, listen_fd: int | None) -> ServerSpec:
        """The spec one child reads; every port must be bound by now."""
        server = self.server(name)
        if server.app_path is None:
            raise ValueError(f"'{name}' runs in-process and has no spec")
        engines = self.engines_of(name)
        overrides = engines.server_overrides() if engines is not None else {}
        return ServerSpec(
            name=server.name,
            server_type=server.server_type,
            implementation=server.implementation,
            app_path=str(server.app_path),
            config={
                **server.config,
                **overrides,
                "host": server.host,
                "port": server.port,
            },  # where it really listens
            host=server.host,
            port=server.port,
            listen_fd=listen_fd,
            servers=self.addresses(),
            head_url=self.head.url,
            session_secret=self.session_secret,
            source=server.source,
            sources=server.sources,
            http_limits=self.http_limits,
        )

    def describe(self) -> list[dict[str, Any]]:
        """A printable view of every process, secrets masked (for `+dry_run=true`)."""
        redactor = self.redactor()
        return [
            {
                "name": process.name,
                "kind": process.kind,
                "implementation": process.implementation or "-",
                "address": process.address,
                "app_path": display_path(process.app_path) if process.app_path else "(inside ng_run)",
                "command": " ".join(process.command) if process.command else "-",
                "config": mask(process.config, redactor=redactor),
                "source": process.source or "-",
            }
            for process in self.processes
        ] + [
            {
                "name": name,
                "kind": "relay",
                "implementation": "legacy_agent",
                "address": f"(served by agent '{relay.agent}')",
                "app_path": "-",
                "command": "-",
                "config": {},
                "source": relay.source or "-",
            }
            for name, relay in self.relays.items()
        ]


def plan_stack(
    config: ComposedConfig,
    *,
    run_dir: Path,
    session_secret: str | None = None,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
    engine_python: str | None = None,
    cluster_gpus: int | None = None,
) -> StackPlan:
    """Plan the head server, the engines, and one child per server instance; ConfigError naming the file.

    `env` (default: this process's) gives the visible GPUs and the engine switches;
    `engine_python` the interpreter engines use when their config names none. With a `ray`
    block, `cluster_gpus` (the cluster's, once connected) replaces the GPUs visible here.
    """
    head = _head_plan(config)
    servers = tuple(
        _server_plan(instance, config, run_dir=run_dir, python=python)
        for instance in config.instances.values()
    )
    _check_port_clashes((head, *servers))
    ray = read_ray_config(config, [server.name for server in servers])
    devices = tuple(str(i) for i in range(cluster_gpus)) if ray and cluster_gpus is not None else None
    engines = engine_plans(
        config,
        env=os.environ if env is None else env,
        python=engine_python,
        devices=devices,
        on_cluster=ray is not None,
    )
    placement = None
    if ray is not None:
        actor_servers = ray.actor_servers([server.name for server in servers])
        _check_actor_servers(servers, actor_servers, config)
        placement = plan_placement(
            engines,
            run_id=_random.token_hex(4),
            cpus_per_bundle=ray.engine_num_cpus,
            expert_groups_may_span=ray.expert_groups_may_span,
            server_cpus=actor_servers,
        )
    return StackPlan(
        head=head,
        servers=servers,
        run_dir=run_dir,
        session_secret=session_secret or _random.token_hex(32),
        masked_config=mask(config.tree),
        secrets=frozenset(secret_values(config.tree)),
        ready_timeout_s=read_seconds(config, "ready_timeout_s", DEFAULT_READY_TIMEOUT_S),
        engines=engines,
        relays=dict(config.relays),
        ray=ray,
        placement=placement,
        http_limits=http_limits(config),
    )


def http_limits(config: ComposedConfig) -> ConnectionLimits | None:
    """The servers' connection pools from NeMo Gym's `global_aiohttp_connector_limit*`; None when
    neither is set (each server keeps its default)."""
    options = read_http_client_options(config.tree, config.sources)
    total, per_host = options.global_aiohttp_connector_limit, options.global_aiohttp_connector_limit_per_host
    if total is None and per_host is None:
        return None
    default = ConnectionLimits()
    return ConnectionLimits(
        total=default.total if total is None else total,
        per_host=default.per_host if per_host is None else per_host,
    )


def _check_actor_servers(
    servers: tuple[ServerPlan, ...], actors: Mapping[str, float], config: ComposedConfig
) -> None:
    for server in servers:
        if server.name in actors and server.workers > 1:
            raise ConfigError(
                f"{_at(config.sources.lookup('ray.servers'))}ray.servers: '{server.name}' has num_workers "
                f"{server.workers}; a server actor runs one process",
                hint="run several instances of it as actors instead, or leave it out of ray.servers",
            )


def engine_plans(
    config: ComposedConfig,
    *,
    env: Mapping[str, str],
    python: str | None,
    devices: tuple[str, ...] | None = None,
    on_cluster: bool = False,
) -> tuple[InstanceEngines, ...]:
    """Engines of every local_vllm_model instance without a base_url, on devices taken in order
    (`devices`, else the GPUs visible here: CUDA_VISIBLE_DEVICES or the first instance's num_gpus),
    or on its own `gpu_ids` (not `on_cluster`: a Ray placement picks the GPUs there)."""
    plans: list[InstanceEngines] = []
    taken: set[str] = set()
    for instance in config.instances.values():
        if instance.implementation != LOCAL_ENGINES_IMPLEMENTATION:
            continue
        engine_config = validate_block(LocalVllmModelConfig, instance, sources=config.sources)
        if not engine_config.launches_engines:
            continue
        if devices is None:
            devices = visible_devices(env, engine_config.num_gpus)
        free = tuple(device for device in devices if device not in taken)
        if engine_config.gpu_ids is not None:
            where = f"{_at(config.sources.lookup(f'{instance.key}.gpu_ids'))}{instance.name}.gpu_ids"
            free = _own_gpus(engine_config.gpu_ids, taken, on_cluster=on_cluster, where=where)
        plan = plan_engines(
            instance.name,
            engine_config,
            env=env,
            devices=free,
            python=python or default_engine_python(),
            source=instance.source,
            locate=_locator(config, instance.key),
        )
        taken |= {device for engine in plan.engines for device in engine.devices}
        plans.append(plan)
    return tuple(plans)


def _own_gpus(gpu_ids: list[int], taken: set[str], *, on_cluster: bool, where: str) -> tuple[str, ...]:
    """An instance's `gpu_ids`, refused on a Ray cluster (placement picks there) or where an
    instance before it already took one of them."""
    if on_cluster:
        raise ConfigError(
            f"{where}: names GPUs of this machine; with a `ray` block the placement picks "
            "each engine's GPUs on the cluster's nodes",
            hint="remove gpu_ids, or the ray block to run on this machine",
        )
    own = tuple(str(gpu) for gpu in gpu_ids)
    clash = sorted(taken.intersection(own))
    if clash:
        raise ConfigError(
            f"{where}: {gpu_ids} takes GPU {', '.join(clash)}, which an instance before it already has",
            hint="give each instance its own GPUs",
        )
    return own


def head_url_from_config(config: ComposedConfig) -> str:
    """Where external processes find the head server: `head_server_url`, else `head_server`."""
    explicit = config.get("head_server_url")
    if explicit:
        return str(explicit).rstrip("/")
    head = _head_plan(config)
    port = head.port or DEFAULT_HEAD_PORT
    return replace(head, port=port).url


def _head_plan(config: ComposedConfig) -> ServerPlan:
    block = config.get(HEAD_NAME) or {}
    where = config.sources.lookup(HEAD_NAME)
    if not isinstance(block, dict):
        raise ConfigError(f"{_at(where)}{HEAD_NAME}: expected a mapping with host and port, got {block!r}")
    return ServerPlan(
        name=HEAD_NAME,
        kind="head",
        server_type="",
        implementation="",
        app_path=None,
        host=_host(block, f"{HEAD_NAME}.host", config.sources.lookup(f"{HEAD_NAME}.host")),
        port=_port(block, f"{HEAD_NAME}.port", config.sources.lookup(f"{HEAD_NAME}.port"), DEFAULT_HEAD_PORT),
        config={},
        source=where,
    )


def _locator(config: ComposedConfig, prefix: str) -> Callable[[str], str | None]:
    """ "file:line" of a key of one instance block, for the engine planner's errors."""

    def locate(key: str) -> str | None:
        return config.sources.lookup(f"{prefix}.{key}" if key else prefix)

    return locate


def _server_plan(
    instance: ServerInstance, config: ComposedConfig, *, run_dir: Path, python: str
) -> ServerPlan:
    block = instance.block
    label = f"instance '{instance.name}' ({instance.kind})"
    where = _at(config.sources.lookup(f"{instance.key}.entrypoint") or instance.source)
    entrypoint = block.get("entrypoint")
    if not isinstance(entrypoint, str) or not entrypoint:
        raise ConfigError(
            f"{where}{label}: 'entrypoint' must be a file name such as app.py, got {entrypoint!r}"
        )
    folder = implementation_dir(instance.server_type, instance.implementation)
    app_path = folder / entrypoint
    if not app_path.resolve().is_relative_to(folder.resolve()):
        raise ConfigError(
            f"{where}{label}: entrypoint {entrypoint!r} resolves outside {display_path(folder)}/",
            hint="an entrypoint is a file inside its implementation's folder, such as app.py",
        )
    if not app_path.is_file():
        present = ", ".join(sorted(p.name for p in folder.glob("*.py"))) if folder.is_dir() else "(no folder)"
        raise ConfigError(
            f"{where}{label}: entrypoint {display_path(app_path)} does not exist",
            hint=f"entrypoint is relative to {display_path(folder)}/ (Python files there: {present or 'none'})",
        )
    spec_path = run_dir / f"{instance.name}.spec.json"
    return ServerPlan(
        name=instance.name,
        kind=_KINDS.get(instance.server_type, instance.server_type),
        server_type=instance.server_type,
        implementation=instance.implementation,
        app_path=app_path,
        host=_host(block, f"{label} host", config.sources.lookup(f"{instance.key}.host") or instance.source),
        port=_port(
            block, f"{label} port", config.sources.lookup(f"{instance.key}.port") or instance.source, 0
        ),
        config=block,
        source=instance.source,
        sources=instance_sources(config, instance),
        spec_path=spec_path,
        command=(python, "-m", CHILD_MODULE, str(spec_path)),
        workers=_workers(block, instance, config),
    )


def _workers(block: Mapping[str, Any], instance: ServerInstance, config: ComposedConfig) -> int:
    """`num_workers` of an agent (validated with its config class; here only where it may be set)."""
    workers = block.get("num_workers", 1)
    if workers == 1:
        return 1
    where = _at(config.sources.lookup(f"{instance.key}.num_workers") or instance.source)
    if instance.server_type != "responses_api_agents":
        raise ConfigError(
            f"{where}'{instance.name}': num_workers applies to agents only",
            hint="resources and model servers keep per-session state in their process (sessions, "
            "endpoint affinity), so one process serves each; start more instances instead",
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
        raise ConfigError(f"{where}'{instance.name}': num_workers must be 1-64, got {workers!r}")
    return workers


def instance_sources(config: ComposedConfig, instance: ServerInstance) -> dict[str, str]:
    """Where each key of the instance's block was written (newest origin), by full dotted key."""
    prefix = instance.key + "."
    return {
        key: origin
        for key, origin in config.sources.items()
        if key == instance.key or key.startswith(prefix) or key == instance.name
    }


def _host(block: Mapping[str, Any], what: str, where: str | None) -> str:
    host = block.get("host", DEFAULT_HOST)
    if host is None:
        return DEFAULT_HOST
    if not isinstance(host, str) or not host:
        raise ConfigError(f"{_at(where)}{what}: expected an address such as 127.0.0.1, got {host!r}")
    return host


def _port(block: Mapping[str, Any], what: str, where: str | None, default: int) -> int:
    port = block.get("port", default)
    if port is None:  # unset: any free port
        return 0
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(
            f"{_at(where)}{what}: expected a port number 0-65535 (0 = any free port), got {port!r}"
        )
    return port


def _check_port_clashes(processes: tuple[ServerPlan, ...]) -> None:
    taken: dict[tuple[str, int], str] = {}
    for process in processes:
        if process.port == 0:
            continue
        other = taken.setdefault((connect_host(process.host), process.port), process.name)
        if other != process.name:
            raise ConfigError(
                f"{_at(process.source)}'{process.name}' and '{other}' both ask for port {process.port}",
                hint="give one of them another port, or 0 for any free port",
            )


def read_seconds(config: ComposedConfig, key: str, default: float) -> float:
    """A positive duration from the config, or a ConfigError naming the key and where it was set."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ConfigError(
            f"{_at(config.sources.lookup(key))}{key}: expected a positive number of seconds, got {value!r}"
        )
    return float(value)


def _at(where: str | None) -> str:
    return f"{where}  " if where else ""
