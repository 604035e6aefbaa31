"""`ng_reward_profile` in NeMo Gym's form: materialized inputs + rollouts -> NeMo Gym's three files.

    +materialized_inputs_jsonl_fpath=<stem>_materialized_inputs.jsonl +rollouts_jsonl_fpath=<stem>.jsonl
      -> <rollouts stem>_reward_profiling.jsonl     one line per task (NeMo Gym's group-level metrics)
         <rollouts stem>_agent_metrics.json         per agent
         <rollouts stem>_repeat_level_metrics.json  per agent and rollout index

As NeMo Gym 0.7.0 (`nemo_gym/cli/eval.py: reward_profile`): rows and results are matched by
(`_ng_task_index`, `_ng_rollout_index`); a key twice in either file, or a result without a
materialized row, is an error; materialized rows without a result are an error unless
`+allow_partial_rollouts=true`, which drops them. The statistics are `reward_stats`'.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict

from ng_cli.errors import DataError
from ng_cli.outputs import check_outputs, reads, write_atomically, writes
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY
from ng_cli.rollouts.reward_stats import profile_from_data, rollout_numbers

__all__ = [
    "NemoProfileConfig",
    "NemoProfileResult",
    "nemo_profile_paths",
    "profile_like_nemo_gym",
]

Key = tuple[Any, Any]


class NemoProfileConfig(BaseModel):
    """NeMo Gym's `RewardProfileConfig`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    materialized_inputs_jsonl_fpath: Path
    """The collector's `<stem>_materialized_inputs.jsonl`."""
    rollouts_jsonl_fpath: Path
    """The collector's output."""
    allow_partial_rollouts: bool = False
    """Drop materialized rows that have no result instead of refusing."""


@dataclass(frozen=True)
class NemoProfileResult:
    """What was written, and NeMo Gym's completion summary."""

    files: tuple[Path, Path, Path]
    expected_rollouts: int
    completed_rollouts: int
    tasks: int
    complete_tasks: int
    partial_tasks: int
    missing_tasks: int


def nemo_profile_paths(rollouts: Path) -> tuple[Path, Path, Path]:
    """NeMo Gym's names: `<stem>_reward_profiling.jsonl`, `_agent_metrics.json`, `_repeat_level_metrics.json`."""
    stem = rollouts.with_suffix("")
    return (
        stem.with_name(stem.name + "_reward_profiling.jsonl"),
        stem.with_name(stem.name + "_agent_metrics.json"),
        stem.with_name(stem.name + "_repeat_level_metrics.json"),
    )


def profile_like_nemo_gym(config: NemoProfileConfig) -> NemoProfileResult:
    """Check the outputs against the inputs, read both files, align them, write the three files."""
    files = nemo_profile_paths(config.rollouts_jsonl_fpath)
    check_outputs(
        writes("rollouts_jsonl_fpath", config.rollouts_jsonl_fpath, *files),
        reads("materialized_inputs_jsonl_fpath", config.materialized_inputs_jsonl_fpath)
        + reads("rollouts_jsonl_fpath", config.rollouts_jsonl_fpath),
    )
    rows = _index(_read(config.materialized_inputs_jsonl_fpath, numbers_only=False), "materialized input")
    results = _index(_read(config.rollouts_jsonl_fpath, numbers_only=True), "result")
    extra = sorted(results.keys() - rows.keys())
    if extra:
        raise DataError(
            "Rollout results contain rows with no matching materialized input rows. "
            f"Found {len(extra)} extra rollout rows. Extra rollout keys: {extra[:10]}",
            hint="pass the _materialized_inputs.jsonl written beside these rollouts",
        )
    missing = sorted(rows.keys() - results.keys())
    if missing and not config.allow_partial_rollouts:
        raise DataError(
            "Materialized input rows and rollout results do not have matching rollout keys. "
            f"Missing rollout results for {len(missing)} materialized input rows. "
            f"Missing rollout keys: {missing[:10]}",
            hint="+allow_partial_rollouts=true profiles the completed rollouts of a partial collection",
        )
    group, agent, repeat = profile_from_data(list(rows.values()), list(results.values()))
    _write(files, group, agent, repeat)
    return _summary(files, rows, results)


def _read(path: Path, *, numbers_only: bool) -> Iterator[dict[str, Any]]:
    """The rows of a JSONL file; results reduced to what the statistics read (a few numbers)."""
    if not path.is_file():
        raise DataError(f"Input file not found: '{path}'", hint="check the path is spelled correctly")
    with path.open("rb") as file:
        for line_no, raw in enumerate(file, start=1):
            if not raw.strip():
                continue
            try:
                row = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise DataError(f"Malformed JSON in '{path}' at line {line_no}: {exc}") from None
            if not isinstance(row, dict) or TASK_KEY not in row or ROLLOUT_KEY not in row:
                raise DataError(f"{path}:{line_no}: a row without {TASK_KEY} and {ROLLOUT_KEY}")
            yield _numbers_only(row) if numbers_only else row


def _numbers_only(row: Mapping[str, Any]) -> dict[str, Any]:
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    reduced: dict[str, Any] = {TASK_KEY: row[TASK_KEY], ROLLOUT_KEY: row[ROLLOUT_KEY]}
    reduced.update(rollout_numbers({**row, "response": {}}))
    if isinstance(usage, Mapping):
        reduced["response"] = {"usage": dict(usage)}
    return reduced


def _index(rows: Iterator[dict[str, Any]], name: str) -> dict[Key, dict[str, Any]]:
    indexed: dict[Key, dict[str, Any]] = {}
    for row in rows:
        key = (row[TASK_KEY], row[ROLLOUT_KEY])
        if key in indexed:
            raise DataError(f"Duplicate {name} row for rollout key {key}")
        indexed[key] = row
    return indexed


def _write(
    files: tuple[Path, Path, Path],
    group: list[dict[str, Any]],
    agent: list[dict[str, Any]],
    repeat: list[dict[str, Any]],
) -> None:
    with write_atomically(*files) as (profiling, agents, repeats):
        for line in group:
            profiling.write(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
        agents.write(orjson.dumps(agent))
        repeats.write(orjson.dumps(repeat))


def _summary(
    files: tuple[Path, Path, Path], rows: Mapping[Key, Any], results: Mapping[Key, Any]
) -> NemoProfileResult:
    expected: dict[Any, int] = {}
    completed: dict[Any, int] = {}
    for task, rollout in rows:
        expected[task] = expected.get(task, 0) + 1
        completed[task] = completed.get(task, 0) + ((task, rollout) in results)
    return NemoProfileResult(
        files=files,
        expected_rollouts=len(rows),
        completed_rollouts=len(rows.keys() & results.keys()),
        tasks=len(expected),
        complete_tasks=sum(completed[t] == n for t, n in expected.items()),
        partial_tasks=sum(0 < completed[t] < n for t, n in expected.items()),
        missing_tasks=sum(completed[t] == 0 for t in expected),
    )
