"""`nemo_gym.skills`: `stage_skills`, the one name NeMo Gym's agents import from it.

A skills directory holds one subdirectory per skill; an agent runtime copies it where its own
discovery looks (Claude Code: `<CLAUDE_CONFIG_DIR>/skills/`). Rows carry a skills reference only
when NeMo Gym's collector stamps one from its `skills` key, which ours refuses
(docs/collecting.md), so here the function runs only for an agent's own configured path.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ng_cli.nemo_gym_compat.api import _resolve_under_cwd_or_install

__all__ = ["stage_skills"]


def stage_skills(path: str, dest_skills_dir: Path) -> None:
    """Copy the skills directory at `path` (relative: the working directory, then NeMo Gym's
    root) to `dest_skills_dir`, which must not exist yet; a missing source is a ValueError."""
    resolved = _resolve_under_cwd_or_install(path)
    if not resolved.is_dir():
        raise ValueError(
            f"Cannot stage skills: {resolved} is not a directory (from skills path {path!r}). "
            "For distributed runs the skills directory must be on storage accessible to the agent."
        )
    shutil.copytree(resolved, dest_skills_dir)
