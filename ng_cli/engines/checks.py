"""The checks of an engine config before any layout: what `plan_engines` refuses, and the shape it lays out.

Refused before anything starts (ConfigError, exit 2, naming the key's file:line): keys the plan
owns in `vllm_serve_kwargs`; parallel sizes that are not positive integers; a served name without
`model`; a bad sample timeout in the environment; more GPUs than visible; EP for a model without
experts; an EP that no DP x TP layout yields; independent DP=1 engines with expert parallelism
beyond TP, which vLLM runs with EP = TP (experts silently never sharded); `replicas_per_device`
outside replicas; `engine_ports` that do not match the engines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ng_cli.engines.config import DataParallelMode, LocalVllmModelConfig
from ng_cli.engines.model_info import ModelInfo, read_model_info, resolve_model_dir
from ng_cli.engines.quirks import sample_timeout_s
from ng_cli.errors import ConfigError

__all__ = ["CheckedConfig", "Parallelism", "check_engine_config", "check_engine_ports"]

At = Callable[[str], str]
"""`at(key)`: the `file:line  instance.` prefix of an error about that key of the block."""

_PARALLEL_KEYS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
_OWNED_KEYS = {
    "model": "set `model` on the instance",
    "host": "set `engine_host` on the instance",
    "port": "set `engine_ports` on the instance (one per engine), or leave them to ng_run",
    "data_parallel_rank": "ranks are assigned by the plan (data_parallel_mode: external_lb)",
    "data_parallel_address": "the plan sets it for each data-parallel group",
    "data_parallel_rpc_port": "the plan picks one per data-parallel group",
    "data_parallel_size_local": "the plan sets it from data_parallel_mode",
    "data_parallel_start_rank": "the plan sets it from data_parallel_mode",
}


@dataclass(frozen=True)
class Parallelism:
    """The parallel shape every check agreed to: what the layout lays out."""

    tp: int
    pp: int
    dp: int
    ep: int
    mode: DataParallelMode
    group_dp: int
    """The data-parallel size of one vLLM deployment (1 for replicas; EP / TP for an expert group)."""


@dataclass(frozen=True)
class CheckedConfig:
    """A config that passed: its parallel shape, the model, and the serve kwargs left to render."""

    shape: Parallelism
    kwargs: dict[str, Any]
    served: str
    model_path: Path
    info: ModelInfo


def check_engine_config(
    config: LocalVllmModelConfig, *, env: Mapping[str, str], devices: tuple[str, ...], at: At
) -> CheckedConfig:
    """Every check that needs no layout; a ConfigError naming the key's file:line on the first failure."""
    kwargs = {key.replace("-", "_"): value for key, value in config.vllm_serve_kwargs.items()}
    for key, why in _OWNED_KEYS.items():
        if key in kwargs:
            raise ConfigError(
                f"{at(f'vllm_serve_kwargs.{key}')}vllm_serve_kwargs.{key}: set by ng_run's engine plan",
                hint=why,
            )
    tp, pp, dp = (
        _positive(kwargs.pop(key, 1), f"{at(f'vllm_serve_kwargs.{key}')}vllm_serve_kwargs.{key}")
        for key in _PARALLEL_KEYS
    )
    enable_ep = kwargs.pop("enable_expert_parallel", False) is True
    served = _served_names(kwargs.pop("served_model_name", None), config.model, where=at("vllm_serve_kwargs"))
    model_path = resolve_model_dir(config.model, hf_home=config.hf_home, where=at("model"))
    info = read_model_info(model_path, where=at("model"))
    timeout_problem = _timeout_problem(env)
    if timeout_problem:
        raise ConfigError(
            f"{at('')}{timeout_problem}", hint="unset it, or export a positive number of seconds"
        )
    shape = _parallelism(config, info, tp=tp, pp=pp, dp=dp, enable_ep=enable_ep, at=at)
    needed = -(-dp // config.replicas_per_device) * tp * pp
    if devices and needed > len(devices):
        raise ConfigError(
            f"{at('vllm_serve_kwargs')}vllm_serve_kwargs asks for {needed} GPUs (data {dp} x tensor {tp} x pipeline {pp}) "
            f"but only {len(devices)} are left for it ({', '.join(devices)})",
            hint="lower data_parallel_size, or make more GPUs visible (CUDA_VISIBLE_DEVICES / num_gpus)",
        )
    return CheckedConfig(shape=shape, kwargs=kwargs, served=served, model_path=model_path, info=info)


def check_engine_ports(config: LocalVllmModelConfig, engines: int, *, at: At) -> None:
    """`engine_ports`, when given, names one port per engine endpoint of the layout."""
    if config.engine_ports is not None and len(config.engine_ports) != engines:
        raise ConfigError(
            f"{at('engine_ports')}engine_ports lists {len(config.engine_ports)} ports for {engines} engine endpoints",
            hint="give one port per engine endpoint, or leave engine_ports unset",
        )


def _parallelism(
    config: LocalVllmModelConfig, info: ModelInfo, *, tp: int, pp: int, dp: int, enable_ep: bool, at: At
) -> Parallelism:
    """The data-parallel mode and expert-group size of a TP/PP/DP/EP request, or the ConfigError."""
    ep = _expert_parallel_size(
        config, info, tp=tp, dp=dp, enable_ep=enable_ep, where=at("expert_parallel_size")
    )
    mode = config.data_parallel_mode or ("internal_lb" if ep > 1 else "replicas")
    if mode == "replicas" and ep > tp:
        raise ConfigError(
            f"{at('data_parallel_mode')}data_parallel_mode: replicas with expert_parallel_size {ep} > tensor_parallel_size "
            f"{tp}: each independent engine (data-parallel size 1) would run with expert-parallel size "
            f"{tp}, so experts would not be sharded over {ep} ranks (the plan of NeMo RL's async "
            "DP+EP pull request, which silently ran every engine with EP 1)",
            hint="vLLM derives EP = DP x TP inside one data-parallel group; the plan that shards "
            f"experts: {_right_plan(dp=dp, tp=tp, pp=pp, ep=ep)}",
        )
    group_dp = 1 if mode == "replicas" else (ep // tp if ep > 1 else dp)
    if dp % group_dp:
        raise ConfigError(
            f"{at('vllm_serve_kwargs.data_parallel_size')}data_parallel_size {dp} is not a multiple of {group_dp}, the data-parallel size "
            f"of one expert group (expert_parallel_size {ep} / tensor_parallel_size {tp})",
            hint=f"use data_parallel_size {group_dp * max(1, dp // group_dp)} or another expert_parallel_size",
        )
    share = config.replicas_per_device
    if share > 1 and mode != "replicas":
        raise ConfigError(
            f"{at('replicas_per_device')}replicas_per_device {share} applies to independent replicas only, "
            f"not to data_parallel_mode {mode} (one vLLM data-parallel group owns its devices)",
            hint="remove replicas_per_device, or use data_parallel_mode: replicas for a dense model",
        )
    return Parallelism(tp=tp, pp=pp, dp=dp, ep=ep, mode=mode, group_dp=group_dp)


def _expert_parallel_size(
    config: LocalVllmModelConfig, info: ModelInfo, *, tp: int, dp: int, enable_ep: bool, where: str
) -> int:
    """The EP size the plan must deliver (1: none); ConfigError when no layout yields it."""
    ep = config.expert_parallel_size
    if ep is None:
        if not enable_ep:
            return 1
        ep = (dp if config.data_parallel_mode != "replicas" else 1) * tp
    if (ep > 1 or enable_ep) and not info.is_moe:
        raise ConfigError(
            f"{where}expert_parallel_size {ep}: the model {info.path} has no experts "
            f"(config.json model_type {info.model_type!r} names no num_experts / num_local_experts / "
            "n_routed_experts)",
            hint="expert parallelism applies to mixture-of-experts models only; remove it",
        )
    if ep == 1:
        return 1
    if ep % tp:
        raise ConfigError(
            f"{where}expert_parallel_size {ep} is not data-parallel x tensor-parallel size for any "
            f"data-parallel size with tensor_parallel_size {tp} (vLLM derives EP = DP x TP)",
            hint=f"use a multiple of {tp}, e.g. expert_parallel_size {tp * max(1, ep // tp)}",
        )
    if ep // tp > dp:
        raise ConfigError(
            f"{where}expert_parallel_size {ep} needs {ep // tp} data-parallel ranks of tensor_parallel_size "
            f"{tp}, but data_parallel_size is {dp}",
            hint=f"set vllm_serve_kwargs.data_parallel_size to a multiple of {ep // tp}",
        )
    if info.is_moe and ep > info.num_experts:
        raise ConfigError(
            f"{where}expert_parallel_size {ep} exceeds the model's {info.num_experts} experts",
            hint=f"use at most {info.num_experts}",
        )
    return ep


def _right_plan(*, dp: int, tp: int, pp: int, ep: int) -> str:
    group_dp = ep // tp
    groups = dp // group_dp if group_dp and dp % group_dp == 0 else 1
    return (
        f"data_parallel_mode: internal_lb -> {groups} engine(s), each one vLLM data-parallel group "
        f"of {group_dp} ranks x TP {tp} x PP {pp} ({group_dp * tp * pp} GPUs) with "
        f"--enable-expert-parallel, i.e. EP {group_dp * tp} per group "
        "(or external_lb: one endpoint per rank)"
    )


def _served_names(value: Any, model: str, *, where: str) -> str:
    """The name requests use is `model`; other served names of the user's are not needed by us."""
    if value is None:
        return model
    names = [value] if isinstance(value, str) else list(value)
    if model not in names:
        raise ConfigError(
            f"{where}vllm_serve_kwargs.served_model_name {names} does not include model {model!r}, "
            "the name the model server sends",
            hint="leave served_model_name unset (it defaults to model) or set model to the served name",
        )
    return model


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what}: expected a positive integer, got {value!r}")
    return value


def _timeout_problem(env: Mapping[str, str]) -> str | None:
    try:
        sample_timeout_s(env)
    except ValueError as error:
        return str(error)
    return None
