"""The report's numbers and plots, computed from a `Tally` once the whole file has been read.

pass@k and mean@k come from the collector's `Scoreboard` (`ng_cli.rollouts.metrics`): the run's
values are its `agent_metrics`, and the curve's point at k is the same computation over each
task's first k repeats (`_ng_rollout_index < k`), so the last point is the run's pass@K.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from html import escape
from typing import Any

from ng_cli.report import svg
from ng_cli.report.tally import Tally
from ng_cli.rollouts.metrics import passes

__all__ = ["Figures", "RunInfo", "compute_figures", "task_columns"]

_TIMELINE_BUCKETS = 20
_CONTEXT_REASONS = frozenset({"context_length_exceeded", "context_overflow"})


@dataclass(frozen=True)
class RunInfo:
    """What `<output stem>_metrics.json` adds, when the collector wrote one."""

    num_repeats: int | None = None
    pass_threshold: float | None = None
    rollouts_per_s: float | None = None
    elapsed_s: float | None = None


@dataclass(frozen=True)
class Figures:
    """Everything the page shows above the task table."""

    k: int
    agents: dict[str, dict[str, Any]]
    """Per agent: the collector's summary numbers (`Scoreboard.agent_metrics`)."""
    totals: dict[str, Any]
    plots: dict[str, str]
    """Plot id -> SVG (one or more charts)."""


def compute_figures(tally: Tally, info: RunInfo) -> Figures:
    """Metrics per agent and overall, and every plot."""
    k = tally.num_repeats(info.num_repeats)
    board = tally.scoreboard(k)
    agents = {agent: board.agent_metrics(agent, pass_threshold=info.pass_threshold) for agent in tally.agents}
    failures = Counter(failure.kind for failure in tally.failures)
    totals = {
        "rollouts": tally.rollouts,
        "tasks": len(tally.task_agent),
        "failed": len(tally.failures),
        "failures": dict(failures.most_common()),
        "context_overflows": failures["context_overflow"]
        + sum(n for reason, n in tally.incomplete.items() if reason in _CONTEXT_REASONS),
        "incomplete": dict(tally.incomplete.most_common()),
        "output_tokens": sum(tally.tokens),
        "mean_reward": board.mean_reward(),
        "rollouts_per_s": info.rollouts_per_s,
        "elapsed_s": info.elapsed_s,
        "weight_versions": tally.versions.as_dict(max_staleness=None),
    }
    plots = {
        "reward": _per_agent_histograms(tally, tally.reward, x_label="reward"),
        "length": _per_agent_histograms(tally, tally.tokens, x_label="output tokens per rollout"),
        "turns": _per_agent_histograms(tally, tally.turns, x_label="model turns per rollout"),
        "failures": _failure_timeline(tally),
    }
    if k > 1:
        plots["passk"] = _pass_curves(tally, k, info.pass_threshold)
    if len({version for _, version in tally.reward_by_version}) > 1:
        plots["versions"] = _reward_by_version(tally)
    return Figures(k=k, agents=agents, totals=totals, plots=plots)


def task_columns(tally: Tally, k: int, pass_threshold: float | None) -> dict[str, list[Any]]:
    """The task table's columns, one entry per task (by task index)."""
    order = tally.task_order()
    position = {task: i for i, task in enumerate(order)}
    n, passing, failed = [0] * len(order), [0] * len(order), [0] * len(order)
    reward_sum = [0.0] * len(order)
    for i in range(tally.rollouts):
        p = position[tally.task[i]]
        n[p] += 1
        reward_sum[p] += tally.reward[i]
        passing[p] += passes(tally.reward[i], pass_threshold)
    for failure in tally.failures:
        failed[position[failure.task_index]] += 1
    return {
        "task": order,
        "agent": [tally.task_agent[task] for task in order],
        "prompt": [tally.prompts.get(task, "") for task in order],
        "n": n,
        "mean": [round(s / c, 6) if c else None for s, c in zip(reward_sum, n, strict=True)],
        "passing": passing,
        "pass": [(1 if p else 0) if c >= k else None for p, c in zip(passing, n, strict=True)],
        "failed": failed,
    }


def _per_agent_histograms(tally: Tally, column: Any, *, x_label: str) -> str:
    """One histogram per agent (small multiples), labelled when there is more than one agent."""
    charts = []
    for agent_id, agent in enumerate(tally.agents):
        values = [column[i] for i in range(tally.rollouts) if tally.agent[i] == agent_id]
        if not values:
            continue
        chart = svg.bar_chart(svg.histogram(values), x_label=x_label, color=svg.PALETTE[agent_id % 8])
        charts.append(f"<figure><figcaption>{escape(agent)}</figcaption>{chart}</figure>")
    return "".join(charts)


def _pass_curves(tally: Tally, k: int, pass_threshold: float | None) -> str:
    """pass@k and mean@k for k = 1..K, per agent, from the first k repeats of each task."""
    pass_series: dict[str, list[float | None]] = {agent: [] for agent in tally.agents}
    mean_series: dict[str, list[float | None]] = {agent: [] for agent in tally.agents}
    for j in range(1, k + 1):
        board = tally.scoreboard(k, repeats_below=j)
        for agent in tally.agents:
            metrics = board.agent_metrics(agent, pass_threshold=pass_threshold)
            pass_series[agent].append(metrics["pass@1"] if j == 1 else metrics[f"pass@{j}"])
            mean_series[agent].append(metrics["mean_reward"] if j == 1 else metrics[f"mean@{j}"])
    xs = list(range(1, k + 1))
    return (
        f"<figure><figcaption>pass@k</figcaption>{svg.line_chart(xs, pass_series, x_label='k', y_label='pass@k')}"
        f"</figure><figure><figcaption>mean@k</figcaption>"
        f"{svg.line_chart(xs, mean_series, x_label='k', y_label='mean@k')}</figure>"
    )


def _reward_by_version(tally: Tally) -> str:
    """Mean reward per weight version, per agent: a training run's learning curve.

    A rollout counts at the version its calls started under (`weight_version.start`), as the
    collector's `rollouts_by_start_version` does; a version an agent has no rollout of is a gap.
    """
    versions = sorted({version for _, version in tally.reward_by_version})
    series: dict[str, list[float | None]] = {}
    counts: dict[str, list[int]] = {}
    for agent_id, agent in enumerate(tally.agents):
        sums = [tally.reward_by_version.get((agent_id, version)) for version in versions]
        if any(sums):
            series[agent] = [None if s is None else s[0] / s[1] for s in sums]
            counts[agent] = [0 if s is None else int(s[1]) for s in sums]
    chart = svg.line_chart(
        versions, series, x_label="weight version (at a rollout's start)", y_label="mean reward",
        x_name="version", counts=counts,
    )  # fmt: skip
    return f"<figure><figcaption>mean reward by weight version</figcaption>{chart}</figure>"


def _failure_timeline(tally: Tally) -> str:
    """Failed rollouts by class along the run, as a share of the rollouts in each stretch.

    The failures file has no timestamps, so "along the run" is the input order: the collector
    starts tasks in that order through a bounded queue, so a stretch of tasks is a stretch of time
    within one run (a resumed run retries its earlier failures first).
    """
    if not tally.failures:
        return '<p class="empty">No failed rollouts.</p>'
    order = tally.task_order()
    buckets = min(_TIMELINE_BUCKETS, len(order))
    bucket_of = {task: i * buckets // len(order) for i, task in enumerate(order)}
    attempts = [0] * buckets
    for i in range(tally.rollouts):
        attempts[bucket_of[tally.task[i]]] += 1
    kinds = sorted({failure.kind for failure in tally.failures})
    counts = {kind: [0.0] * buckets for kind in kinds}
    for failure in tally.failures:
        bucket = bucket_of[failure.task_index]
        counts[failure.kind][bucket] += 1
        attempts[bucket] += 1
    shares = {
        kind: [c / a if a else 0.0 for c, a in zip(values, attempts, strict=True)]
        for kind, values in counts.items()
    }
    labels = [str(order[math.ceil(i * len(order) / buckets)]) for i in range(buckets)]
    chart = svg.stacked_bar_chart(
        labels,
        shares,
        x_label="task index (input order ≈ start order)",
        y_label="share failed",
        colors=[svg.PALETTE[(i + 2) % 8] for i in range(len(kinds))],
    )
    return f"<figure><figcaption>failed rollouts by class</figcaption>{chart}</figure>"
