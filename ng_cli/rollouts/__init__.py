"""Collecting scored rollouts at scale: stream the input, run a bounded pool, lose nothing.

`ng_collect_rollouts` is `collect_config_from` + `run_collection` + `render_summary`; the
modules each hold one concern (inputs, discovery, results, failures, resume, metrics, progress).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ng_cli.lazy import lazy_exports

if TYPE_CHECKING:
    from ng_cli.rollouts.collect import collect_rollouts, run_collection
    from ng_cli.rollouts.config import CollectConfig, collect_config_from
    from ng_cli.rollouts.failures import Failure, FailureKind, classify
    from ng_cli.rollouts.progress import make_view
    from ng_cli.rollouts.run import CollectResult
    from ng_cli.rollouts.summary import render_summary

# Lazy: ng_run and the other commands read `rollouts.config` (STACK_FILE_COMMANDS) and need
# none of the collector (aiohttp, rich's live view).
_HOMES = {
    "collect_rollouts": "collect",
    "run_collection": "collect",
    "CollectConfig": "config",
    "collect_config_from": "config",
    "Failure": "failures",
    "FailureKind": "failures",
    "classify": "failures",
    "make_view": "progress",
    "CollectResult": "run",
    "render_summary": "summary",
}

__all__ = [
    "CollectConfig",
    "CollectResult",
    "Failure",
    "FailureKind",
    "classify",
    "collect_config_from",
    "collect_rollouts",
    "make_view",
    "render_summary",
    "run_collection",
]

__getattr__ = lazy_exports(__name__, _HOMES)
