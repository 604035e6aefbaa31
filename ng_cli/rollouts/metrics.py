"""The scoreboard: which (task, rollout) pairs are done, their rewards, and the metrics they give.

Memory is about 9 bytes per rollout (one float per pair, NaN while not done) plus small per-agent
tallies, never the rows: a million tasks x 8 repeats is ~70 MB.

Definitions (also in docs/collecting.md):
* a rollout *passes* when `reward > 0`, or `reward >= pass_threshold` when one is given;
* `pass@k`: the fraction of tasks, among those whose k rollouts all succeeded, with at least one
  passing rollout (k = num_repeats);
* `mean@k`: the mean over those same tasks of the task's mean reward;
* `pass@1`: the fraction of all successful rollouts that pass.
Tasks with any rollout still failed are left out of pass@k / mean@k and counted as
`tasks_incomplete`, because a partial set of k samples would bias both.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ng_cli.rollouts.results import Outcome
from ng_cli.rollouts.versions import VersionTally

__all__ = ["AgentTally", "Scoreboard", "passes"]


def passes(reward: float, threshold: float | None) -> bool:
    """Whether one rollout counts as a pass (see the module docstring)."""
    return reward > 0 if threshold is None else reward >= threshold


@dataclass
class AgentTally:
    """Running sums for one agent, cheap to update on every rollout."""

    rollouts: int = 0
    reward_sum: float = 0.0
    output_tokens: int = 0
    incomplete: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    with_token_ids: int = 0
    token_drifted: int = 0

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.rollouts if self.rollouts else None


class Scoreboard:
    """Rewards per (task, rollout) pair, and per-agent tallies; the source of every metric."""

    def __init__(
        self, *, num_tasks: int, num_repeats: int, agents: Sequence[str], task_agents: Sequence[int]
    ) -> None:
        self.num_tasks = num_tasks
        self.num_repeats = num_repeats
        self.agents = list(agents)
        self._task_agents = task_agents
        self._rewards = array("d", [math.nan]) * (num_tasks * num_repeats)
        self.tallies = {agent: AgentTally() for agent in self.agents}
        self.duplicates = 0
        self.versions = VersionTally()

    @property
    def total(self) -> int:
        return self.num_tasks * self.num_repeats

    def agent_of(self, task_index: int) -> str:
        return self.agents[self._task_agents[task_index]]

    def is_done(self, task_index: int, rollout_index: int) -> bool:
        return not math.isnan(self._rewards[task_index * self.num_repeats + rollout_index])

    def contains(self, task_index: int, rollout_index: int) -> bool:
        return 0 <= task_index < self.num_tasks and 0 <= rollout_index < self.num_repeats

    def record(self, outcome: Outcome) -> bool:
        """Count one successful rollout; False (and counted as a duplicate) if it was already done."""
        if self.is_done(outcome.task_index, outcome.rollout_index):
            self.duplicates += 1
            return False
        self._rewards[outcome.task_index * self.num_repeats + outcome.rollout_index] = outcome.reward
        tally = self.tallies[self.agent_of(outcome.task_index)]
        tally.rollouts += 1
        tally.reward_sum += outcome.reward
        tally.output_tokens += outcome.output_tokens
        if outcome.incomplete_reason is not None:
            tally.incomplete[outcome.incomplete_reason] += 1
        if outcome.token_drift is not None:
            tally.with_token_ids += 1
            tally.token_drifted += outcome.token_drift
        self.versions.add(outcome.weight_version)
        return True

    def record_failure(self, task_index: int, kind: str) -> None:
        self.tallies[self.agent_of(task_index)].failures[kind] += 1

    @property
    def done(self) -> int:
        return sum(tally.rollouts for tally in self.tallies.values())

    @property
    def failed(self) -> int:
        return sum(sum(tally.failures.values()) for tally in self.tallies.values())

    def mean_reward(self) -> float | None:
        done = self.done
        return sum(t.reward_sum for t in self.tallies.values()) / done if done else None

    def agent_metrics(self, agent: str, *, pass_threshold: float | None) -> dict[str, Any]:
        """The summary numbers for one agent (what the table and `_metrics.json` show)."""
        tally = self.tallies[agent]
        passed = complete = partial = task_passes = 0
        mean_sum = 0.0
        k = self.num_repeats
        for task in range(self.num_tasks):
            if self.agents[self._task_agents[task]] != agent:
                continue
            rewards = [r for r in self._rewards[task * k : (task + 1) * k] if not math.isnan(r)]
            passed += sum(passes(r, pass_threshold) for r in rewards)
            if len(rewards) < k:
                partial += 1
                continue
            complete += 1
            task_passes += any(passes(r, pass_threshold) for r in rewards)
            mean_sum += sum(rewards) / k
        metrics: dict[str, Any] = {
            "rollouts": tally.rollouts,
            "failed": sum(tally.failures.values()),
            "mean_reward": tally.mean_reward,
            "pass@1": passed / tally.rollouts if tally.rollouts else None,
            "output_tokens": tally.output_tokens,
            "incomplete": dict(tally.incomplete),
            "failures": dict(tally.failures),
        }
        if tally.with_token_ids:  # ng_check_tokens' count: turns whose prompt ids repeat no earlier ids
            metrics["token_ids"] = {"rollouts": tally.with_token_ids, "drifted": tally.token_drifted}
        if k > 1:
            metrics[f"pass@{k}"] = task_passes / complete if complete else None
            metrics[f"mean@{k}"] = mean_sum / complete if complete else None
            metrics["tasks_complete"] = complete
            metrics["tasks_incomplete"] = partial
        return metrics
