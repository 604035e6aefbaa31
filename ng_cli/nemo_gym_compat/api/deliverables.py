"""`nemo_gym.deliverables`: which files an agent left behind are its deliverables (NeMo Gym's rule).

An agent's output folder may hold its own run state beside what it produced (its history, its
log, the reference files it was given). `IGNORE_FILES` names that state; `is_deliverable` is a
regular file not so named. gdpval grades only deliverables, and the collector's invalid-judge
migration (`rollout_collection.migrate_invalid_judge_main_rows`) reuses a row's folder only when
one is there.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["IGNORE_FILES", "is_deliverable"]

IGNORE_FILES = frozenset(
    {
        "finish_params.json",
        "history.json",
        "history.pkl",
        "inprogress_history.json",
        "metadata.json",
        "log.txt",
        "reference_files",
    }
)
"""Run state that may sit beside an agent's output and is never graded or reused."""


def is_deliverable(path: Path) -> bool:
    """A regular file whose name is not run state."""
    return path.is_file() and path.name not in IGNORE_FILES
