"""math_with_judge's metric hooks: NeMo Gym 0.7.0's `LibraryJudgeMathResourcesServer` overrides.

`compute_metrics`: pass@k, pass@1[avg-of-k], majority@k over the extracted answers and the
per-sample spread, for `symbolic_accuracy` (math-verify's `library_reward`) and, for rollouts the
judge decided, `judge_accuracy` (the reward). `get_key_metrics`: the token means, then the highest
k of `pass@1[avg-of-k]`, `pass@k` and `majority@k`. The collector and ng_aggregate_rollouts run
them (`ng_cli.rollouts.metric_hooks`).
"""

from __future__ import annotations

from typing import Any

from ng_cli.nemo_gym_compat.api.reward_profile import compute_pass_majority_metrics, highest_k_metrics
from ng_cli.rollouts.metric_hooks import MetricHooks, Tasks

__all__ = ["MathMetrics"]


def math_scores(rollout: dict[str, Any]) -> dict[str, float | bool]:
    """NeMo Gym's `_math_score_fn`; our `judge_used` is its `judge_evaluations` being set."""
    scores: dict[str, float | bool] = {}
    if "library_reward" in rollout:
        scores["symbolic_accuracy"] = rollout["library_reward"]
    if rollout.get("judge_evaluations") is not None or rollout.get("judge_used"):
        scores["judge_accuracy"] = rollout["reward"]
    return scores


class MathMetrics(MetricHooks):
    """The hooks `MathWithJudge.metric_hooks` names."""

    def compute_metrics(self, tasks: Tasks) -> dict[str, Any]:
        return compute_pass_majority_metrics(tasks, score_fn=math_scores, answer_key="extracted_answer")[0]

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key = {
            name: agent_metrics[name]
            for name in ("mean/input_tokens", "mean/output_tokens")
            if name in agent_metrics
        }
        key.update(highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]"))
        key.update(highest_k_metrics(agent_metrics, "pass@{k}", exclude_names=["no_answer"]))
        key.update(highest_k_metrics(agent_metrics, "majority@{k}", exclude_names=["no_answer"]))
        return key
