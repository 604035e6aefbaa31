"""`nemo_gym.rollout_collection`: the record keys and failure classes servers and agents stamp.

Servers import the names under which a rollout's record carries its failure (`gdpval`:
`NG_FAILURE_CLASS_KEY`, `NG_TERMINAL_KEY`) and the rule that decides whether a persisted failure
is retried on resume (`is_terminal_failure`). Those are a record format, given here. NeMo Gym's
collection driver itself (`RolloutCollectionHelper`, `RolloutCollectionConfig`) is not: our
collector is `ng_collect_rollouts` (`ng_cli.rollouts`), and a server that drives NeMo Gym's
collector from inside (gdpval's multistage orchestrator) needs NeMo Gym installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ng_cli.nemo_gym_compat.api.global_config import ROLLOUT_INDEX_KEY_NAME, TASK_INDEX_KEY_NAME

__all__ = [
    "AGENT_REQUEST_FAILED_FAILURE_CLASS",
    "AGENT_RUN_ERROR_FAILURE_CLASS",
    "ENVIRONMENT_SERVER_FAILURE_CLASS",
    "NG_DISPATCH_DRAINED_KEY",
    "NG_ELAPSED_KEY",
    "NG_ENVIRONMENT_SERVER_KEY",
    "NG_FAILURE_CLASS_KEY",
    "NG_NO_PERSIST_KEY",
    "NG_PERF_KEY",
    "NG_RESULT_TYPE_KEY",
    "NG_TASK_ID_KEY",
    "NG_TERMINAL_KEY",
    "NG_TRAJECTORY_KEY",
    "ROLLOUT_INDEX_KEY_NAME",
    "TASK_INDEX_KEY_NAME",
    "is_terminal_failure",
]

NG_FAILURE_CLASS_KEY = "_ng_failure_class"
NG_NO_PERSIST_KEY = "_ng_no_persist"
NG_DISPATCH_DRAINED_KEY = "_ng_dispatch_drained"
NG_TERMINAL_KEY = "_ng_failure_terminal"
NG_ENVIRONMENT_SERVER_KEY = "_ng_environment_server"
NG_RESULT_TYPE_KEY = "_ng_result_type"
NG_TASK_ID_KEY = "_ng_task_id"
NG_TRAJECTORY_KEY = "ng_trajectory"
NG_PERF_KEY = "ng_perf"
NG_ELAPSED_KEY = "elapsed_seconds"
AGENT_REQUEST_FAILED_FAILURE_CLASS = "agent_request_failed"
AGENT_RUN_ERROR_FAILURE_CLASS = "agent_run_error"
ENVIRONMENT_SERVER_FAILURE_CLASS = "environment_server_failed"

_RETRIED_WHEN_ASKED = frozenset(
    {"timeout_exceeded", "reference_missing", "eval_missing", "transport_ineligible"}
)
"""Failure classes a resume may retry under `retry_terminal_timeouts` (a per-attempt timeout, and
environment faults that can be repaired between runs)."""
_ALWAYS_TERMINAL = frozenset({"skipped"})


def is_terminal_failure(record: Mapping[str, Any], *, retry_terminal_timeouts: bool = False) -> bool:
    """Whether a persisted failure stays failed on resume: stamped `_ng_failure_terminal`; with
    `retry_terminal_timeouts`, a timeout or a repairable environment fault is retried anyway and
    a skipped sample never is."""
    if retry_terminal_timeouts:
        failure_class = record.get(NG_FAILURE_CLASS_KEY)
        if failure_class in _RETRIED_WHEN_ASKED:
            return False
        if failure_class in _ALWAYS_TERMINAL:
            return True
    return bool(record.get(NG_TERMINAL_KEY))
