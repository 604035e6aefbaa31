"""`ng_aggregate_rollouts`: NeMo Gym's aggregation of rollout shards into one file and its metrics.

    +input_glob='results/rollouts-*.jsonl'   (a glob, or several separated by commas)
      -> +output_jsonl_fpath                  the shards' rows, sorted by (task, rollout)
                                              (unless +merge_shards=false)
      -> <output stem>_aggregate_metrics.json per agent, as the collector writes it

As NeMo Gym 0.7.0 (`RolloutAggregationHelper`): matches are sorted and de-duplicated, a shard's
`_failures.jsonl` and `_materialized_inputs.jsonl` siblings are never shards. Unlike it, a match
that is not a regular file is refused before anything is opened, indices must be integers, and a
rollout two shards hold is counted once (`shards`). The metrics are the collector's
(`materialized.aggregate_entries`): each agent's environment's own metric hooks run when the config
(`-c`) names it, as NeMo Gym's `/aggregate_metrics` runs them. Every file written is checked against every shard first
(`ng_cli.outputs`), and written whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import orjson
from pydantic import Field

from ng_cli.config.command_options import CommandOptions, command_options
from ng_cli.config.compose import ComposedConfig
from ng_cli.config.nemo_gym_options import NotOffered
from ng_cli.errors import DataError
from ng_cli.outputs import check_outputs, reads, write_atomically, write_bytes_atomically, writes
from ng_cli.rollouts.config import NOT_OFFERED
from ng_cli.rollouts.counted_zeros import Zeros, counted_zeros
from ng_cli.rollouts.failures import read_failures
from ng_cli.rollouts.materialized import aggregate_entries
from ng_cli.rollouts.metric_hooks import hooks_by_agent
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY
from ng_cli.rollouts.resume import OutputPaths
from ng_cli.rollouts.shards import expand_input_glob, read_shards, refuse_non_regular

__all__ = [
    "AggregateConfig",
    "AggregateResult",
    "aggregate_config_from",
    "aggregate_rollouts",
    "expand_input_glob",
]


class AggregateConfig(CommandOptions):
    """NeMo Gym's `RolloutAggregationConfig`, less its health checks (there are none here)."""

    input_glob: str
    """A glob, or comma-separated globs, matching the rollout shards."""
    output_jsonl_fpath: Path
    """The merged rollouts; `<stem>_aggregate_metrics.json` is written beside it."""
    merge_shards: bool = True
    """Write the shards' rows into `output_jsonl_fpath` (else only the metrics)."""
    disable_health_check: bool = False
    """Accepted for NeMo Gym's command lines; there is no health check to disable here."""
    count_failure_classes_as_zero: list[str] = Field(default_factory=list)
    """Failures of these classes (each shard's `_failures.jsonl`) count as reward 0 in the metrics
    (NeMo Gym's `agent_run_error`, `agent_request_failed`, or a failure kind of this collector)."""
    count_missing_rollouts_as_zero: bool = False
    """A shard's materialized rollout with neither a row nor a failure counts as reward 0."""

    not_offered: ClassVar[Mapping[str, NotOffered]] = {
        key: NOT_OFFERED[key] for key in ("health_check_workers", "health_check_ignored_checks")
    }


@dataclass(frozen=True)
class AggregateResult:
    shards: list[Path]
    rollouts: int
    output: Path | None
    metrics: Path
    dropped: int = 0
    """Rows that repeated a rollout already read (same contents), counted once."""
    warnings: list[str] = field(default_factory=list)


def aggregate_config_from(composed: ComposedConfig) -> AggregateConfig:
    """ng_aggregate_rollouts' options."""
    example = "ng_aggregate_rollouts +input_glob='results/rollouts-*.jsonl' +output_jsonl_fpath=results/rollouts.jsonl"
    return command_options(
        composed,
        AggregateConfig,
        command="ng_aggregate_rollouts",
        asks={
            "input_glob": ("which shards? give a glob of rollout files", example),
            "output_jsonl_fpath": ("where do the merged rollouts go?", example),
        },
    )


def aggregate_rollouts(config: AggregateConfig, *, stack: Mapping[str, Any] | None = None) -> AggregateResult:
    """Check, read every shard, write the merged file (optional) and the metrics.

    `stack`: the config tree (`-c`/`+config_paths`) whose agents name their environments: each
    agent's metrics run its environment's hooks (`metric_hooks`), as NeMo Gym's do."""
    shards = expand_input_glob(config.input_glob)
    if not shards:
        raise DataError(
            f"No shards matched input_glob={config.input_glob!r}", hint="check the pattern and quote it"
        )
    refuse_non_regular(shards)
    metrics = OutputPaths.for_output(config.output_jsonl_fpath).aggregate_metrics
    written = [config.output_jsonl_fpath, metrics] if config.merge_shards else [metrics]
    check_outputs(
        writes("output_jsonl_fpath", config.output_jsonl_fpath, *written),
        [read for shard in shards for read in reads("input_glob", shard)],
    )
    read = read_shards(shards)
    rows = sorted(read.rows, key=lambda r: (r[TASK_KEY], r[ROLLOUT_KEY]))
    if config.merge_shards:
        with write_atomically(config.output_jsonl_fpath) as (out,):
            for row in rows:
                out.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
    hooks = hooks_by_agent(stack or {})
    zeros = _zeros(config, shards, rows)
    entries = aggregate_entries(rows, hooks=hooks, zeros=zeros)
    write_bytes_atomically(metrics, orjson.dumps(entries, option=orjson.OPT_INDENT_2))
    return AggregateResult(
        shards=shards,
        rollouts=len(rows),
        output=config.output_jsonl_fpath if config.merge_shards else None,
        metrics=metrics,
        dropped=read.dropped,
        warnings=read.warnings,
    )


def _zeros(config: AggregateConfig, shards: list[Path], rows: list[dict[str, Any]]) -> Zeros:
    """The count_* options' zeros, each shard checked against its own failures and materialized
    inputs; a rollout any shard scored is never counted."""
    total = Zeros()
    seen: set[tuple[Any, ...]] = set()
    for shard in shards:
        paths = OutputPaths.for_output(shard)
        found = counted_zeros(
            rows,
            read_failures(paths.failures),
            paths.materialized,
            failure_classes=config.count_failure_classes_as_zero,
            count_missing=config.count_missing_rollouts_as_zero,
        )
        for zero in found.rows:
            key = (zero["agent_ref"]["name"], zero[TASK_KEY], zero[ROLLOUT_KEY])
            if key not in seen:
                seen.add(key)
                total.rows.append(zero)
        total.failures += found.failures
        total.missing += found.missing
    return total
