"""What `import nemo_gym` gives a NeMo Gym server here: the package's few top-level names.

The submodules are our stand-ins for NeMo Gym's modules of the same names (see `finder`).
`PARENT_DIR` is the NeMo Gym root the server is loaded from (`finder.install` sets it); the
working directory is the server's own folder, as NeMo Gym starts each server (`cd <folder> &&
python app.py`), so relative paths resolve against the folder first, then the root.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CACHE_DIR", "PARENT_DIR", "_resolve_under_cwd_or_install"]

PARENT_DIR = Path.cwd()
"""NeMo Gym's root: its servers join it with `resources_servers/<name>/...`."""
CACHE_DIR = PARENT_DIR / "cache"


def _resolve_under_cwd_or_install(path: str | Path) -> Path:
    """A relative path under the working directory if it exists there, else under the NeMo Gym
    root (NeMo Gym's order; the first is returned when neither has it)."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return candidate
    for root in (Path.cwd(), PARENT_DIR):
        if (root / candidate).exists():
            return root / candidate
    return Path.cwd() / candidate
