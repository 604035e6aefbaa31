"""Model quirks: what an engine's options must be for a given model, and the environment switches
NeMo RL users carry over (`../docs/engine.md`, "Model quirks").

A quirk is keyed on `model_type` from the model directory's `config.json`; adding one is one
entry in `MODEL_QUIRKS` and one test. Quirks adjust the plan's `vllm serve` options and say why
in a note that ng_run prints; they never touch processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ng_cli.errors import UpstreamTimeoutError

__all__ = [
    "ASYNC_TIMEOUT_ENV",
    "DEFAULT_SAMPLE_TIMEOUT_S",
    "ENGINE_DEFAULTS",
    "MODEL_QUIRKS",
    "USE_V1_ENV",
    "ModelQuirk",
    "Note",
    "SampleTimeoutError",
    "apply_quirks",
    "sample_timeout_s",
]

ASYNC_TIMEOUT_ENV = "NRL_VLLM_ASYNC_TIMEOUT_SECONDS"
DEFAULT_SAMPLE_TIMEOUT_S = 600.0
USE_V1_ENV = "NRL_VLLM_USE_V1"


@dataclass(frozen=True)
class Note:
    """One line ng_run prints about the plan: `info` explains a choice, `warning` overrides a user."""

    level: Literal["info", "warning"]
    text: str


@dataclass(frozen=True)
class ModelQuirk:
    """`vllm serve` options a family of models must run with, and why."""

    model_types: frozenset[str]
    forced_kwargs: Mapping[str, Any]
    reason: str


MODEL_QUIRKS: tuple[ModelQuirk, ...] = (
    ModelQuirk(
        model_types=frozenset({"gemma2", "gemma3", "gemma3_text"}),
        forced_kwargs={"load_format": "auto"},
        reason="vLLM creates a `normalizer` buffer for Gemma-2/3 that the Hugging Face weights do not "
        "have; with dummy weights it keeps its dummy values and a weight refit never overwrites "
        "it, so the real weights are loaded at start",
    ),
)

ENGINE_DEFAULTS: Mapping[str, tuple[Any, str]] = {
    "enforce_eager": (
        True,
        "CUDA graphs broke convergence in RL recipes (NeMo RL's DeepScaleR finding); "
        "set vllm_serve_kwargs.enforce_eager: false to capture graphs",
    ),
}
"""Options with a default other than vLLM's: (value, why). An explicit value in the config wins."""

MULTICAST_OFF_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
"""Switches that turn NVLink multicast off (`NCCL_NVLS_ENABLE=0`, the others `=1`): shared GPU hosts
set them, because a program that uses multicast can take the host's GPUs down for everyone."""

ALLREDUCE_FUSION_OFF_REASON = (
    "NVLink multicast is off here ({switch}), and vLLM 0.26 fuses tensor parallelism's all-reduce with "
    "RMSNorm through FlashInfer's 'mnnvl' all-reduce, which needs it: on two H200s with multicast "
    "off, a TP 2 engine crashed in its first forward pass (an illegal memory access, then "
    "CUBLAS_STATUS_INTERNAL_ERROR; bench/results/gpu/efficiency_8b_tp2_*_ng_run.log); without the "
    "fusion the all-reduce is NCCL's. Set compilation_config.pass_config.fuse_allreduce_rms yourself "
    "to decide otherwise"
)


def apply_quirks(
    kwargs: Mapping[str, Any],
    *,
    model_type: str | None,
    env: Mapping[str, str],
    tensor_parallel_size: int = 1,
) -> tuple[dict[str, Any], list[Note]]:
    """The `vllm serve` options after defaults and quirks, and the notes that explain each change."""
    result = dict(kwargs)
    notes: list[Note] = []
    for key, (value, why) in ENGINE_DEFAULTS.items():
        if key not in result:
            result[key] = value
            notes.append(Note("info", f"{key}: {_shown(value)} by default: {why}"))
    for quirk in MODEL_QUIRKS:
        if model_type not in quirk.model_types:
            continue
        for key, value in quirk.forced_kwargs.items():
            asked = result.get(key)
            result[key] = value
            if asked is not None and asked != value:
                notes.append(
                    Note("warning", f"{key}: {_shown(asked)} overridden with {_shown(value)} for model_type "
                         f"{model_type!r}: {quirk.reason}")
                )  # fmt: skip
            else:
                notes.append(
                    Note("info", f"{key}: {_shown(value)} for model_type {model_type!r}: {quirk.reason}")
                )
    notes.extend(_allreduce_fusion_off(result, env, tensor_parallel_size))
    if env.get(USE_V1_ENV, "").strip() == "0":
        notes.append(
            Note(
                "warning",
                f"{USE_V1_ENV}=0 asks for vLLM's V0 runtime, but the engines ng_run starts are vLLM's "
                "async OpenAI servers, which always run V1 (and vLLM >= 0.11 has no V0 runtime): ignored",
            )
        )
    return result, notes


def _allreduce_fusion_off(
    kwargs: dict[str, Any], env: Mapping[str, str], tensor_parallel_size: int
) -> list[Note]:
    """`fuse_allreduce_rms: false` for TP > 1 where multicast is off and the user left it unset."""
    switch = next(
        (
            f"{name}={env[name]}"
            for name in MULTICAST_OFF_ENV
            if env.get(name, "").strip() == ("0" if name == "NCCL_NVLS_ENABLE" else "1")
        ),
        None,
    )
    if switch is None or tensor_parallel_size <= 1:
        return []
    compilation = kwargs.get("compilation_config") or {}
    if not isinstance(compilation, Mapping):
        return []  # a JSON string or a level number: the user's own, left as given
    pass_config = compilation.get("pass_config") or {}
    if not isinstance(pass_config, Mapping) or "fuse_allreduce_rms" in pass_config:
        return []
    kwargs["compilation_config"] = {
        **compilation,
        "pass_config": {**pass_config, "fuse_allreduce_rms": False},
    }
    reason = ALLREDUCE_FUSION_OFF_REASON.format(switch=switch)
    return [Note("info", f"compilation_config.pass_config.fuse_allreduce_rms: false: {reason}")]


def sample_timeout_s(env: Mapping[str, str]) -> float:
    """The wait for one sample: `NRL_VLLM_ASYNC_TIMEOUT_SECONDS`, else 600 s; ValueError if unusable."""
    raw = env.get(ASYNC_TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_SAMPLE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ASYNC_TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise ValueError(f"{ASYNC_TIMEOUT_ENV}={raw!r} must be a positive number of seconds")
    return value


class SampleTimeoutError(UpstreamTimeoutError):
    """No sample came back from a local engine within `NRL_VLLM_ASYNC_TIMEOUT_SECONDS`."""

    def __init__(self, timeout_s: float) -> None:
        doubled = _shown(timeout_s * 2)
        super().__init__(
            f"vLLM async generation timed out: no sample within {_shown(timeout_s)} s "
            f"({ASYNC_TIMEOUT_ENV}={_shown(timeout_s)}); longer sequences on large models need more time",
            hint=f"export {ASYNC_TIMEOUT_ENV}={doubled}",
        )
        self.timeout_s = timeout_s


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
