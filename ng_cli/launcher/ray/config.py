"""`ray:` in the config: where the stack runs when it runs on a Ray cluster (absent: plain processes).

    ray:
      address: auto              # auto | ray://head:10001 | host:6379 | local (a private cluster)
      servers: [my_env]          # server instances run as actors: a list, `all`, or {name: num_cpus}
      servers_listen_on: loopback  # loopback (on ng_run's node) | node (the node's network address)
      server_num_cpus: 1         # CPUs each server actor asks for (a mapping above overrides it)
      engine_num_cpus: 1         # CPUs per placement-group bundle of an engine
      expert_groups_may_span: false
      capacity_wait_s: 300       # after a lost node: how long to wait for room before stopping
      node_verdict_timeout_s: 120  # an actor that stops answering: how long to wait for Ray's verdict
      num_cpus: 8                # local only: the private cluster's logical CPUs (default: this machine's)

Reading this block imports nothing from Ray: `ray` is an optional extra, loaded by
`launcher.ray.backend` only when a stack has this block.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.secrets import is_secret_key
from ng_cli.errors import ConfigError

__all__ = ["RAY_KEY", "RayConfig", "read_ray_config"]

RAY_KEY = "ray"


class RayConfig(BaseModel):
    """The `ray` block: the cluster to use and what runs on it as actors."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    address: str
    """`auto` (the cluster this machine belongs to, as `ray status` finds it), `ray://host:10001`
    (Ray Client), `host:6379` (the GCS), or `local` (start a private cluster, stopped with ng_run)."""
    namespace: str = "ng_cli"
    """The Ray namespace of our actors (their names carry a per-run id as well)."""
    servers: Literal["all", "none"] | list[str] | dict[str, float] = "none"
    """Server instances that run as Ray actors: `all`, a list of names, or {name: num_cpus}.
    Engines always run as actors when `ray` is set."""
    servers_listen_on: Literal["loopback", "node"] = "loopback"
    """Where server actors whose `host` is loopback (the default 127.0.0.1) listen: `loopback`
    keeps them there, as ng_run's own children, so the actors run on ng_run's node; `node` binds
    the node's network address instead (actors may then run on any node, and anyone who can reach
    the node can call them). A server with another `host` listens there either way."""
    server_num_cpus: float = Field(default=1.0, gt=0)
    """CPUs each server actor asks for (unless `servers` maps the name to its own number)."""
    engine_num_cpus: float = Field(default=1.0, gt=0)
    """CPUs of each placement-group bundle of an engine (one bundle per GPU, or per TP*PP rank on CPU)."""
    expert_groups_may_span: bool = False
    """external_lb only: let the data-parallel ranks of one expert group use several nodes."""
    placement_timeout_s: float = Field(default=120.0, gt=0)
    """How long placement groups may stay pending (e.g. nodes still joining), and an actor (engine, server,
    GPU lease) may take to start on a busy node, before ng_run gives up."""
    capacity_wait_s: float = Field(default=300.0, ge=0)
    """After a node is lost: how long an engine's group or a server actor may wait for room on the
    nodes that remain (or join) before ng_run stops with the reason; it says so every 10 s."""
    node_verdict_timeout_s: float = Field(default=120.0, gt=0)
    """An actor of ours that stops answering: how long ng_run waits for Ray's verdict on it (its
    node declared dead, or the actor dead on a node that still runs work) before it stops, naming the
    actor and node. Nothing is restarted meanwhile. With Ray's default health checks a node whose
    raylet was killed is declared dead about 15 s later (5 missed checks 3 s apart), a host that
    vanished without a word up to about 65 s later (each check may wait 10 s); the default covers both."""
    server_max_restarts: int = Field(default=3, ge=0)
    """Restarts of a server actor whose node was lost (on another node); past them ng_run stops.
    A server that dies while its node lives stops the stack at once, as a local one does."""
    runtime_env: dict[str, Any] | None = None
    """Ray's runtime_env for our actors (e.g. `py_modules`); it is shown by the dashboard, so no
    secrets: the engines' keys travel through the object store instead."""
    num_cpus: int | None = Field(default=None, ge=1)
    """`address: local` only: the private cluster's logical CPUs (default: this machine's count, or
    what the engines' groups and the server actors ask for when that is more)."""
    num_gpus: int | None = Field(default=None, ge=0)
    """`address: local` only: the private cluster's GPUs (default: what Ray detects)."""
    object_store_memory_mb: int = Field(default=256, ge=80)
    """`address: local` only: the object store's size; we keep only spec payloads in it."""

    @field_validator("address")
    @classmethod
    def _check_address(cls, value: str) -> str:
        value = value.strip()
        if value in ("auto", "local") or value.startswith("ray://"):
            return value
        host, _, port = value.rpartition(":")
        if host and port.isdigit():
            return value
        raise ValueError(f"expected auto, local, ray://host:port or host:port, got {value!r}")

    @field_validator("runtime_env")
    @classmethod
    def _no_secrets(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        env_vars = (value or {}).get("env_vars") or {}
        secret = sorted(key for key in env_vars if is_secret_key(str(key)))
        if secret:
            raise ValueError(
                f"env_vars {secret} look secret, and Ray's dashboard shows every actor's runtime_env; "
                "engine secrets belong in the instance's vllm_serve_env_vars / api_key (they travel "
                "through the object store)"
            )
        return value

    @model_validator(mode="after")
    def _loopback_needs_our_node(self) -> RayConfig:
        if (
            self.address.startswith("ray://")
            and self.servers != "none"
            and self.servers_listen_on == "loopback"
        ):
            raise ValueError(
                "servers_listen_on: loopback runs the server actors on ng_run's node, and a Ray Client "
                "connection (ray://) does not make ng_run's machine a node; set servers_listen_on: node "
                "(the servers then listen on their node's network address) or connect with auto or host:6379"
            )
        return self

    @property
    def is_local(self) -> bool:
        return self.address == "local"

    def actor_servers(self, names: list[str]) -> dict[str, float]:
        """The server instances (of `names`) that run as actors, with the CPUs each asks for."""
        if self.servers == "none":
            return {}
        if self.servers == "all":
            return dict.fromkeys(names, self.server_num_cpus)
        if isinstance(self.servers, dict):
            return dict(self.servers)
        return dict.fromkeys(self.servers, self.server_num_cpus)


def read_ray_config(config: ComposedConfig, instances: list[str]) -> RayConfig | None:
    """The validated `ray` block, or None without one; ConfigError naming `ray.<key>` and its file:line."""
    block = config.get(RAY_KEY)
    if block is None:
        return None
    where = config.sources.lookup(RAY_KEY)
    if isinstance(block, str):  # `+ray.address=...` is the common form, `ray=auto` a natural slip
        block = {"address": block}
    if not isinstance(block, dict):
        raise ConfigError(
            f"{_at(where)}ray: expected a mapping such as {{address: auto}}, got {block!r}",
            hint="++ray.address=local starts a private Ray cluster; ++ray.address=auto joins this machine's",
        )
    try:
        ray = RayConfig.model_validate(block)
    except ValidationError as error:
        problems = []
        for problem in error.errors():
            key = ".".join(str(part) for part in (RAY_KEY, *problem["loc"]) if not isinstance(part, int))
            located = config.sources.lookup(key) or where
            message = str(problem["msg"]).removeprefix("Value error, ")
            if problem["type"] == "extra_forbidden":
                message = f"unknown key (known: {', '.join(RayConfig.model_fields)})"
            elif problem["type"] == "missing":
                message = "required: auto, local, ray://host:port or host:port"
            problems.append(f"{_at(located)}{key}: {message}")
        raise ConfigError("\n".join(problems), hint="docs/ray.md lists the ray keys") from None
    unknown = sorted(set(ray.actor_servers(instances)) - set(instances))
    if unknown:
        raise ConfigError(
            f"{_at(config.sources.lookup(f'{RAY_KEY}.servers') or where)}ray.servers: no server instance "
            f"named {', '.join(repr(name) for name in unknown)}",
            hint=f"the stack's instances: {', '.join(instances) or '(none)'}",
        )
    return ray


def _at(where: str | None) -> str:
    return f"{where}  " if where else ""
