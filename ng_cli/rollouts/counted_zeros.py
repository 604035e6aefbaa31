"""NeMo Gym's `count_failure_classes_as_zero` and `count_missing_rollouts_as_zero`: rollouts
without a reward put back into the metrics' denominator as zeros.

A failed rollout leaves the output, so by default the score is over fewer rollouts than were
asked for, and reads higher the more failed. With these options `_aggregate_metrics.json` counts:

* a failure (`<stem>_failures.jsonl`) whose class is asked for, as reward 0.0 (`mask_sample:
  false`). The class is NeMo Gym's: `agent_run_error` when the agent answered with an HTTP status
  (but 429, 502, 503, 504), else `agent_request_failed`; this collector's own kind (`timeout`,
  `http_5xx`, ...) is accepted too;
* with `count_missing_rollouts_as_zero`, a materialized rollout with neither a row nor a failure
  (not started under dispatch_budget_s, cut off by Ctrl-C), as reward 0.0.

As NeMo Gym 0.7.0 (`_counted_failure_row`, `_missing_rollout_rows_counted_as_zero`,
`_fill_task_fields`): the zero carries its indices and agent, plus the task's dataset fields that
the agent's real rows carry (from `_materialized_inputs.jsonl`). Only the metrics change: no
artifact is rewritten.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY

__all__ = ["Zeros", "counted_zeros", "nemo_gym_failure_class"]

_GATEWAY_STATUSES = frozenset({429, 502, 503, 504})
"""NeMo Gym's `_SERVER_DID_NOT_RUN_STATUSES`: an answer that says nothing about the rollout."""

Key = tuple[str, int, int]


@dataclass
class Zeros:
    """The zero rows to add to the metrics, and how many of each kind."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    failures: int = 0
    missing: int = 0


def nemo_gym_failure_class(record: Mapping[str, Any]) -> str:
    """The `_ng_failure_class` NeMo Gym writes for this failure (module docstring)."""
    status = record.get("status")
    ran = isinstance(status, int) and status not in _GATEWAY_STATUSES
    return "agent_run_error" if ran else "agent_request_failed"


def counted_zeros(
    real_rows: Sequence[Mapping[str, Any]],
    failures: Iterable[Mapping[str, Any]],
    materialized: Path | None,
    *,
    failure_classes: Sequence[str],
    count_missing: bool,
) -> Zeros:
    """The zeros the options ask for (module docstring); `real_rows` are the scored rollouts."""
    zeros = Zeros()
    if not failure_classes and not count_missing:
        return zeros
    scored = {_key(row) for row in real_rows}
    wanted = set(failure_classes)
    failed: set[Key] = set()
    counted: set[Key] = set()
    for record in failures:
        agent = str(record.get("agent"))
        key = (agent, int(record[TASK_KEY]), int(record[ROLLOUT_KEY]))
        failed.add(key)
        if key in scored or key in counted:
            continue
        if nemo_gym_failure_class(record) in wanted or str(record.get("kind")) in wanted:
            counted.add(key)
            zeros.rows.append({**_zero(*key), "mask_sample": False})
            zeros.failures += 1
    sources = list(_read(materialized)) if materialized is not None and materialized.exists() else []
    if count_missing:
        for source in sources:
            key = _key(source)
            if key not in scored and key not in failed:
                scored.add(key)
                zeros.rows.append(_zero(*key))
                zeros.missing += 1
    _fill_task_fields(zeros.rows, real_rows, sources)
    return zeros


def _key(row: Mapping[str, Any]) -> Key:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, Mapping) else ref
    return str(name), int(row[TASK_KEY]), int(row[ROLLOUT_KEY])


def _zero(agent: str, task: int, rollout: int) -> dict[str, Any]:
    return {TASK_KEY: task, ROLLOUT_KEY: rollout, "agent_ref": {"name": agent}, "reward": 0.0}


def _fill_task_fields(
    added: list[dict[str, Any]], real_rows: Sequence[Mapping[str, Any]], sources: Sequence[Mapping[str, Any]]
) -> None:
    """The task's dataset fields on each zero, only those the agent's real rows carry (a field no
    real row reports would become a metric of its own)."""
    if not added:
        return
    carried: dict[str, set[str]] = defaultdict(set)
    for row in real_rows:
        carried[_key(row)[0]].update(row)
    wanted = {_key(row): row for row in added}
    for source in sources:
        target = wanted.get(_key(source))
        if target is None:
            continue
        for name in carried[_key(source)[0]] & source.keys():
            if not name.startswith("_") and name not in ("responses_create_params", "response"):
                target.setdefault(name, source[name])


def _read(path: Path) -> Iterable[dict[str, Any]]:
    with path.open("rb") as file:
        for line in file:
            if line.strip():
                yield orjson.loads(line)
