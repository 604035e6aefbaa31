"""NeMo Gym's two run files beside the output: `_materialized_inputs.jsonl` and `_aggregate_metrics.json`.

    <stem>_materialized_inputs.jsonl   one line per (task, rollout): the row exactly as sent to the
                                       agent (overrides merged, agent resolved, seed added), with
                                       `_ng_task_index` and `_ng_rollout_index`; tasks in input
                                       order, each task's repeats together (NeMo Gym's aabbcc),
                                       or round by round with interleave_repeats (abcabc)
    <stem>_aggregate_metrics.json      per agent: what NeMo Gym's environment `/aggregate_metrics`
                                       answers for its scored rollouts, the environment's own metric
                                       hooks run (`environment_metrics`), plus counted zeros when asked

NeMo Gym's `ng_reward_profile +materialized_inputs_jsonl_fpath=... +rollouts_jsonl_fpath=...`
reads the first; scripts that compare runs read the second. Both are written whole, beside their
name, and renamed into place (`ng_cli.outputs`); the output guard checked them with the run's
other files before anything was written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from ng_cli.errors import DataError
from ng_cli.outputs import write_atomically, write_bytes_atomically
from ng_cli.rollouts.config import CollectConfig
from ng_cli.rollouts.counted_zeros import Zeros
from ng_cli.rollouts.environment_metrics import aggregate_metrics
from ng_cli.rollouts.inputs import InputSummary, Task, iter_tasks, with_seed
from ng_cli.rollouts.metric_hooks import MetricHooks
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY

__all__ = [
    "aggregate_entries",
    "iter_jobs",
    "materialized_rows",
    "read_rows",
    "run_body",
    "stripped",
    "write_aggregate_metrics",
    "write_materialized_inputs",
]


def run_body(
    config: CollectConfig, row: Mapping[str, Any], task_index: int, rollout_index: int
) -> dict[str, Any]:
    """The body of one rollout's POST /run: the row (seeded for its repeat when asked) with its
    `_ng_task_index` and `_ng_rollout_index`, as NeMo Gym's collector sends it. Servers read them:
    a cohort scorer (genrm_compare) groups a prompt's rollouts by them and refuses a row without."""
    seeded = with_seed(row, rollout_index) if config.num_repeats_add_seed else row
    return {**seeded, TASK_KEY: task_index, ROLLOUT_KEY: rollout_index}


def iter_jobs(config: CollectConfig, summary: InputSummary) -> Iterator[tuple[Task, int]]:
    """Every (task, rollout index) of the run, in NeMo Gym's order: each task's repeats together
    (aabbcc), or with `interleave_repeats` round by round (abcabc: the input is read once per round)."""
    k = config.num_repeats
    if config.interleave_repeats:  # NeMo Gym sorts by _ng_rollout_index, fan_out's copies included
        for rollout_index in range(k * summary.max_slots):
            for task in iter_tasks(summary, params_overrides=config.responses_create_params):
                first = summary.slot(task.index) * k
                if first <= rollout_index < first + k:
                    yield task, rollout_index - first
        return
    for task in iter_tasks(summary, params_overrides=config.responses_create_params):
        for rollout_index in range(config.num_repeats):
            yield task, rollout_index


def materialized_rows(config: CollectConfig, summary: InputSummary) -> Iterator[dict[str, Any]]:
    """Every (task, rollout) row as the collector sends it, in NeMo Gym's order."""
    for task, rollout_index in iter_jobs(config, summary):
        yield run_body(config, task.row, *summary.external(task.index, rollout_index, config.num_repeats))


def write_materialized_inputs(config: CollectConfig, summary: InputSummary, path: Path) -> None:
    """Stream the materialized rows into `path` (staged, renamed at the end)."""
    with write_atomically(path) as (file,):
        for row in materialized_rows(config, summary):
            file.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))


def write_aggregate_metrics(
    path: Path,
    rows: Iterable[Mapping[str, Any]],
    *,
    hooks: Mapping[str, MetricHooks],
    zeros: Zeros | None = None,
) -> list[dict[str, Any]]:
    """Write NeMo Gym's per-agent aggregate metrics of the scored rollouts (plus counted zeros) to
    `path` (an empty list when nothing was scored)."""
    entries = aggregate_entries(rows, hooks=hooks, zeros=zeros)
    write_bytes_atomically(path, orjson.dumps(entries, option=orjson.OPT_INDENT_2))
    return entries


def read_rows(path: Path, *, skip_torn: bool = False) -> Iterator[dict[str, Any]]:
    """The JSON rows of a JSONL file (blank lines skipped); a bad line is a DataError naming it,
    or skipped with `skip_torn` (the collector's own output: a torn last line is repaired on resume)."""
    with path.open("rb") as file:
        for line_no, raw in enumerate(file, start=1):
            if not raw.strip():
                continue
            try:
                row = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                if skip_torn:
                    continue
                raise DataError(f"{path}:{line_no}: not valid JSON ({exc})") from None
            if isinstance(row, dict) and TASK_KEY in row and ROLLOUT_KEY in row:
                yield row
            elif not skip_torn:
                raise DataError(f"{path}:{line_no}: not a rollout row (no {TASK_KEY} and {ROLLOUT_KEY})")


def aggregate_entries(
    rows: Iterable[Mapping[str, Any]],
    *,
    hooks: Mapping[str, MetricHooks] | None = None,
    zeros: Zeros | None = None,
) -> list[dict[str, Any]]:
    """Per agent, NeMo Gym's environment `/aggregate_metrics` of its rollouts, in (task, rollout)
    order, with the hooks of the agent's environment (NeMo Gym's defaults for an agent without)."""
    by_agent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in [*rows, *(zeros.rows if zeros else [])]:
        by_agent[_agent_name(row)].append(stripped(row))
    entries = []
    for agent in sorted(by_agent):
        rollouts = sorted(by_agent[agent], key=lambda r: (r[TASK_KEY], r[ROLLOUT_KEY]))
        metrics = aggregate_metrics(rollouts, (hooks or {}).get(agent))
        entry = {
            "agent_ref": {"name": agent},
            "agent_metrics": metrics["agent_metrics"],
            "key_metrics": metrics["key_metrics"],
            "group_level_metrics": metrics["group_level_metrics"],
            "repeat_level_metrics": metrics["repeat_level_metrics"],
        }
        if metrics["perf_summary"] is not None:
            entry["perf_summary"] = metrics["perf_summary"]
        entries.append(entry)
    return entries


def _agent_name(row: Mapping[str, Any]) -> str:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, Mapping) else ref
    return str(name)


_HEAVY = frozenset(
    {"response", "responses_create_params", "ng_agent_observations", "ng_model_call_capture", "ng_trajectory"}
)


def stripped(row: Mapping[str, Any]) -> dict[str, Any]:
    """What NeMo Gym's collector posts to `/aggregate_metrics` for one rollout: the row less its
    heavy fields, `response` cut to its `usage` and `incomplete_details`."""
    entry = {k: v for k, v in row.items() if k not in _HEAVY}
    response = row.get("response")
    if isinstance(response, Mapping):
        kept = {k: response[k] for k in ("usage", "incomplete_details") if response.get(k) is not None}
        if kept:
            entry["response"] = kept
    return entry
