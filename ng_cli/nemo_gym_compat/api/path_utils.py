"""`nemo_gym.path_utils`: the files a collection writes beside its output, by NeMo Gym's names.

`out.jsonl` -> `out_failures.jsonl`, `out_materialized_inputs.jsonl`, `out_aggregate_metrics.json`:
the names ng_collect_rollouts writes too (`ng_cli.rollouts.resume.OutputPaths`), so a server that
reads a run's sidecar (gdpval's multistage orchestrator) finds ours. As NeMo Gym's, the stem is the
output's name less its last suffix, whatever that suffix is.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["aggregate_metrics_path_for", "failures_path_for", "materialized_path_for"]


def failures_path_for(output_fpath: Path) -> Path:
    """`results/rollouts.jsonl` -> `results/rollouts_failures.jsonl`."""
    return output_fpath.with_name(output_fpath.stem + "_failures.jsonl")


def materialized_path_for(output_fpath: Path) -> Path:
    """`results/rollouts.jsonl` -> `results/rollouts_materialized_inputs.jsonl`."""
    return output_fpath.with_stem(output_fpath.stem + "_materialized_inputs").with_suffix(".jsonl")


def aggregate_metrics_path_for(output_fpath: Path) -> Path:
    """`results/rollouts.jsonl` -> `results/rollouts_aggregate_metrics.json`."""
    return output_fpath.with_stem(output_fpath.stem + "_aggregate_metrics").with_suffix(".json")
