"""What `import nemo_gym` gives a NeMo Gym server here: the package's few top-level names.

The submodules are our stand-ins for NeMo Gym's modules of the same names (see `finder`). Paths
are those of the NeMo Gym root the stack runs from (the working directory), as under NeMo Gym.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CACHE_DIR", "PARENT_DIR", "_resolve_under_cwd_or_install"]

PARENT_DIR = Path.cwd()
"""NeMo Gym's root: its servers join it with `resources_servers/<name>/...`."""
CACHE_DIR = PARENT_DIR / "cache"


def _resolve_under_cwd_or_install(path: str | Path) -> Path:
    """A relative path under the working directory (the NeMo Gym root), as NeMo Gym resolves it."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return candidate
    return Path.cwd() / candidate
