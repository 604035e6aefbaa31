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


def apply_quirks(
    kwargs: Mapping[str, Any], *, model_type: str | None, env: Mapping[str, str]
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
    if env.get(USE_V1_ENV, "").strip() == "0":
        notes.append(
            Note(
                "warning",
                f"{USE_V1_ENV}=0 asks for vLLM's V0 runtime, but the engines ng_run starts are vLLM's "
                "async OpenAI servers, which always run V1 (and vLLM >= 0.11 has no V0 runtime): ignored",
            )
        )
    return result, notes


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
