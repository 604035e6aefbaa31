"""GPU tests: the engine layer on a real GPU (run them on a GPU machine: `pytest tests/gpu`).

Every test here is marked `gpu` and skips, with the reason, where no GPU answers `nvidia-smi`
(CI never has one). They need the engine environment (vLLM for that GPU: NG_VLLM_VENV, see
docs/engine.md "Air-gapped install"). Figures go to $NG_GPU_RESULTS (a folder) when it is set.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _gpu_names() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
    return (
        [line for line in done.stdout.splitlines() if line.startswith("GPU ")] if done.returncode == 0 else []
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    gpus = None
    for item in items:
        if not item.path.is_relative_to(HERE):
            continue
        item.add_marker(pytest.mark.gpu)
        if gpus is None:
            gpus = _gpu_names()
        if not gpus:
            item.add_marker(pytest.mark.skip(reason="needs a GPU: nvidia-smi finds none on this machine"))
