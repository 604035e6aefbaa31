"""What NeMo Gym's environment `/aggregate_metrics` answers for one agent's rollouts, computed here.

NeMo Gym 0.7.0's `reward_profile.compute_aggregate_metrics`, step by step:

    masked rollouts (`mask_sample: true`) out of the quality numbers, counted as `coverage/*`
    perf_summary            from every rollout's `ng_perf` (absent when none has one)
    profile                 group / agent / repeat level statistics (`reward_stats`)
    hooks.compute_metrics   the environment's own (pass@k, majority@k, ...), merged into agent_metrics;
                            its `per_task_metrics` merged into the group level by task index
    num_repeats             distinct rollout indices
    hooks.get_key_metrics   the headline numbers (+ coverage)
    hooks.compute_repeat_metrics  when overridden: per repeat, replacing the generic ones

The hooks are the environment's (`metric_hooks`); `MetricHooks()` gives NeMo Gym's defaults.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

from ng_cli.rollouts.metric_hooks import MetricHooks, Tasks
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY
from ng_cli.rollouts.reward_stats import add_across_repeats, profile_from_data

__all__ = ["aggregate_metrics", "perf_summary"]

_AGENT_REF = "agent_ref"
_MASK = "mask_sample"
_ACROSS = "_across_repeats/"
_PERF_TOKEN_FIELDS = ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")
_PERF_TOKEN_STATS = ("mean", "median", "total")
_PERF_TURN_STATS = ("mean", "median", "std", "min", "p90", "max")
_PERF_LATENCY_STATS = ("p50", "p90", "p99", "mean")


def aggregate_metrics(
    verify_responses: Sequence[Mapping[str, Any]], hooks: MetricHooks | None = None
) -> dict[str, Any]:
    """group_level_metrics, agent_metrics, key_metrics, repeat_level_metrics and perf_summary of
    one agent's stripped rollouts (module docstring)."""
    hooks = hooks or MetricHooks()
    empty: dict[str, Any] = {
        "group_level_metrics": [],
        "agent_metrics": {},
        "key_metrics": {},
        "repeat_level_metrics": [],
        "perf_summary": None,
    }
    if not verify_responses:
        return empty
    scored = [vr for vr in verify_responses if not vr.get(_MASK)]
    masked = [vr for vr in verify_responses if vr.get(_MASK)]
    coverage = _coverage(verify_responses, scored, masked)
    perf = perf_summary(
        [vr["ng_perf"] for vr in verify_responses if isinstance(vr.get("ng_perf"), Mapping)],
        total_rollouts=len(verify_responses),
    )
    if not scored:
        return {**empty, "agent_metrics": dict(coverage), "key_metrics": dict(coverage), "perf_summary": perf}
    rows = [
        {TASK_KEY: vr.get(TASK_KEY, 0), ROLLOUT_KEY: vr.get(ROLLOUT_KEY, 0), _AGENT_REF: {"name": "agent"}}
        for vr in scored
    ]
    results = [
        {
            **{k: v for k, v in vr.items() if k != _MASK},
            TASK_KEY: vr.get(TASK_KEY, 0),
            ROLLOUT_KEY: vr.get(ROLLOUT_KEY, 0),
            "response": vr.get("response", {}),
        }
        for vr in scored
    ]
    group_level, agent_level, repeat_level = profile_from_data(rows, results)
    agent_metrics = {k: v for entry in agent_level for k, v in entry.items() if k != _AGENT_REF}
    agent_metrics.update(coverage)
    tasks = _by_task(scored)
    custom = hooks.compute_metrics(tasks)
    _merge_per_task(group_level, custom.pop("per_task_metrics", None))
    agent_metrics.update(custom)
    agent_metrics["num_repeats"] = len({vr.get(ROLLOUT_KEY, 0) for vr in verify_responses})
    key_metrics = hooks.get_key_metrics(agent_metrics)
    key_metrics.update(coverage)
    if hooks.has_repeat_metrics:
        _add_repeat_metrics(hooks, scored, repeat_level, agent_metrics, custom)
    return {
        "group_level_metrics": group_level,
        "agent_metrics": agent_metrics,
        "key_metrics": key_metrics,
        "repeat_level_metrics": [{k: v for k, v in e.items() if k != _AGENT_REF} for e in repeat_level],
        "perf_summary": perf,
    }


def _coverage(
    everything: Sequence[Mapping[str, Any]], scored: Sequence[Mapping[str, Any]], masked: Sequence[Any]
) -> dict[str, Any]:
    """NeMo Gym's `coverage/*` numbers: empty when nothing was masked."""
    if not masked:
        return {}
    tasks_total = {vr.get(TASK_KEY, 0) for vr in everything}
    tasks_measured = {vr.get(TASK_KEY, 0) for vr in scored}
    return {
        "coverage/measured_rollouts": len(scored),
        "coverage/masked_rollouts": len(masked),
        "coverage/measured_tasks": len(tasks_measured),
        "coverage/fully_masked_tasks": len(tasks_total - tasks_measured),
    }


def _by_task(verify_responses: Sequence[Mapping[str, Any]]) -> Tasks:
    """Rollouts grouped by task index, tasks in index order (what the hooks receive)."""
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for vr in verify_responses:
        groups[vr.get(TASK_KEY, 0)].append({k: v for k, v in vr.items() if k != _MASK})
    return [groups[key] for key in sorted(groups)]


def _merge_per_task(group_level: list[dict[str, Any]], per_task: Any) -> None:
    if not per_task:
        return
    by_index = {metrics[TASK_KEY]: metrics for metrics in per_task}
    for group in group_level:
        found = by_index.get(group.get(TASK_KEY))
        if found is not None:
            group.update({k: v for k, v in found.items() if k != TASK_KEY})


def _is_finite(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))


def _add_repeat_metrics(
    hooks: MetricHooks,
    scored: Sequence[Mapping[str, Any]],
    repeat_level: list[dict[str, Any]],
    agent_metrics: dict[str, Any],
    custom: Mapping[str, Any],
) -> None:
    """NeMo Gym's `_add_custom_repeat_metrics`: the hook per repeat replaces same-named generic
    metrics, kept only when finite in every repeat; their across-repeat summaries are redone."""
    if not repeat_level:
        return
    by_repeat: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for vr in scored:
        by_repeat[vr.get(ROLLOUT_KEY, 0)].append(vr)
    per_repeat = [hooks.compute_repeat_metrics(_by_task(by_repeat[row[ROLLOUT_KEY]])) for row in repeat_level]
    names = {name for metrics in per_repeat for name in metrics}
    if not names:
        return
    for name in names:
        values = [metrics.get(name) for metrics in per_repeat]
        for row in repeat_level:
            row.pop(name, None)
        if (name not in custom or _is_finite(custom[name])) and all(_is_finite(v) for v in values):
            for row, value in zip(repeat_level, values, strict=True):
                row[name] = float(value)  # type: ignore[arg-type]
    for name in list(agent_metrics):
        if _ACROSS in name and name.split(_ACROSS, 1)[1] in names:
            agent_metrics.pop(name)
    summary: dict[str, Any] = {_AGENT_REF: {"name": "agent"}}
    add_across_repeats([summary], repeat_level)
    agent_metrics.update({k: v for k, v in summary.items() if k != _AGENT_REF})


def perf_summary(records: Sequence[Mapping[str, Any]], *, total_rollouts: int) -> dict[str, Any] | None:
    """NeMo Gym's `compute_perf_summary` of the rollouts' `ng_perf` records (None without any)."""
    if total_rollouts <= 0 or not records:
        return None

    def values(key: str) -> list[float]:
        return [r[key] for r in records if isinstance(r.get(key), int | float)]

    covered = sum(
        1
        for r in records
        if isinstance(r.get("token_observability_coverage"), int | float)
        and r["token_observability_coverage"] > 0
    )
    summary: dict[str, Any] = {
        "overall_observability_coverage": len(records) / total_rollouts,
        "token_observability_coverage": covered / total_rollouts,
    }
    for field in _PERF_TOKEN_FIELDS:
        if found := values(field):
            summary.update({f"{stat}_{field}": _perf_stat(found, stat) for stat in _PERF_TOKEN_STATS})
    if turns := values("num_turns"):
        summary.update({f"{stat}_num_turns": _perf_stat(turns, stat) for stat in _PERF_TURN_STATS})
    per_turn = [
        r["completion_tokens"] / r["num_turns"]
        for r in records
        if isinstance(r.get("completion_tokens"), int | float)
        and isinstance(r.get("num_turns"), int | float)
        and r["num_turns"] > 0
    ]
    if per_turn:
        summary["mean_tokens_per_turn"] = _perf_stat(per_turn, "mean")
        summary["median_tokens_per_turn"] = _perf_stat(per_turn, "median")
    if latency := values("total_latency_ms"):
        summary.update(
            {f"total_latency_{stat}_ms": _perf_stat(latency, stat) for stat in _PERF_LATENCY_STATS}
        )
    return summary


def _perf_stat(values: Sequence[float], stat: str) -> float:
    """NeMo Gym's `_stat`: population std; percentiles by linear interpolation (pandas' quantile)."""
    if stat == "mean":
        return statistics.fmean(values)
    if stat == "median":
        return statistics.median(values)
    if stat == "total":
        return sum(values)
    if stat == "std":
        return statistics.pstdev(values)
    if stat == "min":
        return min(values)
    if stat == "max":
        return max(values)
    ordered = sorted(values)
    position = (len(ordered) - 1) * int(stat[1:]) / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))
