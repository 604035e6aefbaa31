"""`nemo_gym.reward_profile`: pass@k / majority@k helpers servers call from `compute_metrics`.

`compute_pass_majority_metrics`, `add_avg_sample_std_dev`, `compute_subset_metrics` and
`highest_k_metrics` follow NeMo Gym 0.7.0's definitions (Apache-2.0) exactly, since servers'
headline numbers come from them. `compute_aggregate_metrics` (the `/aggregate_metrics` route) is
smaller than NeMo Gym's: mean/min/max of the reward over unmasked rows, plus the server's own
`compute_metrics`; the collector's metrics (`ng_cli.rollouts`) are the run's record here.
`RewardProfiler` has NeMo Gym's per-rollout record (`rollout_info_from_result`) only: its
DataFrame profile of a whole run (pandas, wandb histograms) is the collector's job here.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from ng_cli.nemo_gym_compat.api.config_types import AggregateMetrics
from ng_cli.nemo_gym_compat.api.global_config import ROLLOUT_INDEX_KEY_NAME, TASK_INDEX_KEY_NAME

__all__ = [
    "AggregateMetricsMixin",
    "RewardProfiler",
    "add_avg_sample_std_dev",
    "compute_aggregate_metrics",
    "compute_pass_majority_metrics",
    "compute_subset_metrics",
    "highest_k_metrics",
]

STD_DEV_ACROSS_RUNS = "/std_dev_across_runs"
STD_ERR_ACROSS_RUNS = "/std_err_across_runs"
AVG_SAMPLE_STD_DEV = "/avg_sample_std_dev"
Tasks = list[list[dict[str, Any]]]
ScoreDicts = list[list[dict[str, float]]]


def _pass_at_k(vals: list[float], k: int) -> float:
    if all(v in (0, 1, 0.0, 1.0) for v in vals):
        n_incorrect = sum(1 for v in vals if not v)
        return 1.0 if n_incorrect < k else 1.0 - math.comb(n_incorrect, k) / math.comb(len(vals), k)
    return max(vals[:k])


def _majority(answers: list[Any], scores: list[dict[str, float]], name: str, k: int) -> float:
    valid = [
        (a, s.get(name)) for a, s in zip(answers[:k], scores[:k], strict=False) if a is not None and name in s
    ]
    if not valid:
        return 0.0
    counter = Counter(valid)
    max_count = counter.most_common(1)[0][1]
    tied = [(a, s) for (a, s), c in counter.items() if c == max_count]
    return float(sum(s for _, s in tied if s is not None) / len(tied))


def compute_pass_majority_metrics(
    tasks: Tasks,
    score_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    answer_key: str | None = None,
) -> tuple[dict[str, Any], ScoreDicts, list[str], int]:
    """pass@k, pass@1[avg-of-k], majority@k (with `answer_key`) and run-to-run spread, in percent."""
    if not tasks:
        return {}, [], [], 0
    score = score_fn or (lambda r: {"accuracy": r["reward"]})
    max_k = max(len(rollouts) for rollouts in tasks)
    metrics: dict[str, Any] = {}
    all_scores: ScoreDicts = []
    all_answers: list[list[Any]] = []
    for rollouts in tasks:
        task_scores, task_answers = [], []
        for rollout in rollouts:
            scores = {k: (int(v) if isinstance(v, bool) else v) for k, v in score(rollout).items()}
            if answer_key is not None:
                answer = rollout.get(answer_key)
                task_answers.append(answer)
                scores["no_answer"] = 1 if answer is None else 0
            task_scores.append(scores)
        all_scores.append(task_scores)
        if answer_key is not None:
            all_answers.append(task_answers)
    names = sorted({name for task_scores in all_scores for s in task_scores for name in s})

    for k in range(1, max_k + 1):
        for name in names:
            pass_values = []
            for task_scores in all_scores:
                vals = [s[name] for s in task_scores if name in s]
                if vals and k <= len(vals):
                    pass_values.append(_pass_at_k(vals, k))
            if pass_values:
                metrics[f"pass@{k}/{name}"] = 100.0 * sum(pass_values) / len(pass_values)
            avg_values = []
            for task_scores in all_scores:
                vals = [s[name] for s in task_scores[:k] if name in s]
                if vals:
                    avg_values.append(sum(vals) / len(vals))
            if avg_values:
                metrics[f"pass@1[avg-of-{k}]/{name}"] = 100.0 * sum(avg_values) / len(avg_values)
            if answer_key is not None:
                majority = [_majority(a, s, name, k) for s, a in zip(all_scores, all_answers, strict=False)]
                if majority:
                    metrics[f"majority@{k}/{name}"] = 100.0 * sum(majority) / len(majority)

    per_sample: dict[str, list[float]] = {name: [] for name in names}
    for run in range(max_k):
        for name in names:
            run_scores = [t[run][name] for t in all_scores if run < len(t) and name in t[run]]
            if run_scores:
                per_sample[name].append(100.0 * sum(run_scores) / len(run_scores))
    per_sample = {k: v for k, v in per_sample.items() if v}
    metrics["per_sample_aggregate"] = per_sample
    for k in range(2, max_k + 1):
        for name in names:
            runs = per_sample.get(name, [])[:k]
            if len(runs) >= 2:
                mean = sum(runs) / len(runs)
                std_dev = math.sqrt(sum((x - mean) ** 2 for x in runs) / (len(runs) - 1))
                metrics[f"pass@1[avg-of-{k}]/{name}{STD_DEV_ACROSS_RUNS}"] = std_dev
                metrics[f"pass@1[avg-of-{k}]/{name}{STD_ERR_ACROSS_RUNS}"] = std_dev / math.sqrt(len(runs))
    return metrics, all_scores, names, max_k


def add_avg_sample_std_dev(
    metrics: dict[str, Any], all_score_dicts: ScoreDicts, score_names: list[str], max_k: int
) -> None:
    """Adds the mean over tasks of each task's spread across its first k rollouts (in place)."""
    for k in range(2, max_k + 1):
        for name in score_names:
            spreads = []
            for task_scores in all_score_dicts:
                vals = [s[name] for s in task_scores[:k] if name in s]
                if len(vals) >= 2:
                    mean = sum(vals) / len(vals)
                    spreads.append(math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)))
            if spreads:
                metrics[f"pass@1[avg-of-{k}]/{name}{AVG_SAMPLE_STD_DEV}"] = sum(spreads) / len(spreads)


def compute_subset_metrics(
    tasks: Tasks,
    subset_key: str,
    score_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    answer_key: str | None = None,
) -> dict[str, Any]:
    """`compute_pass_majority_metrics` per value of `subset_key`, keys prefixed `<value>/`."""
    subsets: dict[Any, Tasks] = {}
    for task_rollouts in tasks:
        value = next((r[subset_key] for r in task_rollouts if r.get(subset_key)), None)
        if value:
            subsets.setdefault(value, []).append(task_rollouts)
    metrics: dict[str, Any] = {}
    for subset_name, subset_tasks in subsets.items():
        found, _, _, _ = compute_pass_majority_metrics(subset_tasks, score_fn=score_fn, answer_key=answer_key)
        metrics.update({f"{subset_name}/{k}": v for k, v in found.items() if k != "per_sample_aggregate"})
    return metrics


def highest_k_metrics(
    agent_metrics: dict[str, Any],
    pattern: str,
    score_names: list[str] | None = None,
    exclude_names: list[str] | None = None,
) -> dict[str, Any]:
    """The entries matching `pattern` (`{k}` the placeholder) at the highest k present."""
    regex = re.compile("^" + re.escape(pattern).replace(r"\{k\}", r"(\d+)") + "/(.+)$")
    matches = []
    for key in agent_metrics:
        match = regex.match(key)
        if not match:
            continue
        name = match.group(2)
        if any(name.endswith(s) for s in (STD_DEV_ACROSS_RUNS, STD_ERR_ACROSS_RUNS, AVG_SAMPLE_STD_DEV)):
            continue
        if (score_names is not None and name not in score_names) or (exclude_names and name in exclude_names):
            continue
        matches.append((int(match.group(1)), key))
    if not matches:
        return {}
    top = max(k for k, _ in matches)
    return {key: agent_metrics[key] for k, key in matches if k == top}


class RewardProfiler:
    """NeMo Gym's profiler, for the one record its servers' tests read (genrm_compare's)."""

    def rollout_info_from_result(self, result: dict[str, Any]) -> dict[str, Any]:
        """One rollout's numbers: its id `task:rollout`, both indices, the reward, the response's
        usage counts, and every other numeric field (booleans as 0/1) not starting with `_`.
        A result without both indices is a KeyError, as in NeMo Gym."""
        task_idx, rollout_idx = result[TASK_INDEX_KEY_NAME], result[ROLLOUT_INDEX_KEY_NAME]
        info: dict[str, Any] = {
            "rollout_id": f"{task_idx}:{rollout_idx}",
            TASK_INDEX_KEY_NAME: task_idx,
            ROLLOUT_INDEX_KEY_NAME: rollout_idx,
        }
        if "reward" in result:
            info["reward"] = result.get("reward")
        usage = (result.get("response") or {}).get("usage") or {}
        own = {k: v for k, v in result.items() if not k.startswith("_") and k not in ("reward", "response")}
        for key, value in [*usage.items(), *own.items()]:
            if isinstance(value, bool):
                info[key] = int(value)
            elif isinstance(value, int | float):
                info[key] = value
        return info


class AggregateMetricsMixin:
    """The hooks a server overrides to shape its metrics."""

    def compute_metrics(self, tasks: Tasks) -> dict[str, Any]:
        return {}

    def compute_repeat_metrics(self, tasks: Tasks) -> dict[str, Any]:
        return {}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in agent_metrics.items() if k.startswith("mean/")}


def compute_aggregate_metrics(
    verify_responses: list[dict[str, Any]],
    compute_metrics_fn: Callable[[Tasks], dict[str, Any]] | None = None,
    get_key_metrics_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    compute_repeat_metrics_fn: Callable[[Tasks], dict[str, Any]] | None = None,
) -> AggregateMetrics:
    """Reward mean/min/max over the unmasked rows, plus the server's `compute_metrics` by task."""
    scored = [vr for vr in verify_responses if not vr.get("mask_sample")]
    if not scored:
        return AggregateMetrics()
    rewards = [float(vr.get("reward", 0.0)) for vr in scored]
    agent_metrics: dict[str, Any] = {
        "mean/reward": sum(rewards) / len(rewards),
        "min/reward": min(rewards),
        "max/reward": max(rewards),
    }
    by_task: dict[Any, list[dict[str, Any]]] = {}
    for vr in scored:
        by_task.setdefault(vr.get(TASK_INDEX_KEY_NAME, 0), []).append(vr)
    if compute_metrics_fn is not None:
        agent_metrics.update(compute_metrics_fn([by_task[k] for k in sorted(by_task, key=str)]))
    key_metrics = get_key_metrics_fn(agent_metrics) if get_key_metrics_fn else {}
    return AggregateMetrics(agent_metrics=agent_metrics, key_metrics=key_metrics)
