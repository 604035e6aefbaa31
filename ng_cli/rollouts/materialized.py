"""NeMo Gym's two run files beside the output: `_materialized_inputs.jsonl` and `_aggregate_metrics.json`.

    <stem>_materialized_inputs.jsonl   one line per (task, rollout): the row exactly as sent to the
                                       agent (overrides merged, agent resolved, seed added), with
                                       `_ng_task_index` and `_ng_rollout_index`; tasks in input
                                       order, each task's repeats together (NeMo Gym's aabbcc)
    <stem>_aggregate_metrics.json      per agent: NeMo Gym's default `/aggregate_metrics` of its
                                       scored rollouts (`reward_stats.aggregate_metrics`)

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
from ng_cli.rollouts.inputs import InputSummary, iter_tasks, with_seed
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY
from ng_cli.rollouts.reward_stats import aggregate_metrics, rollout_numbers

__all__ = [
    "aggregate_entries",
    "materialized_rows",
    "read_rows",
    "run_body",
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


def materialized_rows(config: CollectConfig, summary: InputSummary) -> Iterator[dict[str, Any]]:
    """Every (task, rollout) row as the collector sends it, in NeMo Gym's order."""
    for task in iter_tasks(summary, params_overrides=config.responses_create_params):
        for rollout_index in range(config.num_repeats):
            yield run_body(config, task.row, task.index, rollout_index)


def write_materialized_inputs(config: CollectConfig, summary: InputSummary, path: Path) -> None:
    """Stream the materialized rows into `path` (staged, renamed at the end)."""
    with write_atomically(path) as (file,):
        for row in materialized_rows(config, summary):
            file.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))


def write_aggregate_metrics(output: Path, path: Path) -> list[dict[str, Any]]:
    """Read the scored rollouts back and write NeMo Gym's per-agent aggregate metrics (an empty
    list when nothing was scored)."""
    entries = aggregate_entries(read_rows(output, skip_torn=True))
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


def aggregate_entries(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per agent, NeMo Gym's default `/aggregate_metrics` of its rollouts (kept as numbers only)."""
    by_agent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_agent[_agent_name(row)].append(_reduced(row))
    entries = []
    for agent in sorted(by_agent):
        rollouts = sorted(by_agent[agent], key=lambda r: (r[TASK_KEY], r[ROLLOUT_KEY]))
        metrics = aggregate_metrics(rollouts)
        entries.append(
            {
                "agent_ref": {"name": agent},
                "agent_metrics": metrics["agent_metrics"],
                "key_metrics": metrics["key_metrics"],
                "group_level_metrics": metrics["group_level_metrics"],
                "repeat_level_metrics": metrics["repeat_level_metrics"],
            }
        )
    return entries


def _agent_name(row: Mapping[str, Any]) -> str:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, Mapping) else ref
    return str(name)


def _reduced(row: Mapping[str, Any]) -> dict[str, Any]:
    """Only what the statistics read: the indices, the numbers and `response.usage`."""
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    reduced: dict[str, Any] = {TASK_KEY: row[TASK_KEY], ROLLOUT_KEY: row[ROLLOUT_KEY]}
    reduced.update({k: v for k, v in rollout_numbers({**row, "response": {}}).items()})
    if isinstance(usage, Mapping):
        reduced["response"] = {"usage": dict(usage)}
    return reduced
