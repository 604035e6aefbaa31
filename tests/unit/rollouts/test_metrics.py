"""pass@k / mean@k / pass@1 as documented, per agent, with failed rollouts left out honestly."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from ng_cli.rollouts.metrics import Scoreboard, passes
from ng_cli.rollouts.results import Outcome


def outcome(task: int, rollout: int, reward: float, *, tokens: int = 0, reason: str | None = None) -> Outcome:
    return Outcome(task, rollout, reward, tokens, reason)


def board(rewards: list[list[float | None]], *, agents: list[int] | None = None) -> Scoreboard:
    """A scoreboard from a tasks x repeats grid; None is a rollout that failed."""
    k = len(rewards[0])
    scoreboard = Scoreboard(
        num_tasks=len(rewards),
        num_repeats=k,
        agents=["a", "b"] if agents else ["a"],
        task_agents=agents or [0] * len(rewards),
    )
    for task, row in enumerate(rewards):
        for rollout, reward in enumerate(row):
            if reward is None:
                scoreboard.record_failure(task, "timeout")
            else:
                scoreboard.record(outcome(task, rollout, reward))
    return scoreboard


@pytest.mark.parametrize(
    ("reward", "threshold", "passed"),
    [
        (0.0, None, False),
        (0.01, None, True),
        (-1.0, None, False),
        (0.5, 0.5, True),
        (0.49, 0.5, False),
        (1, 1.0, True),
    ],
)
def test_pass_rule(reward: float, threshold: float | None, passed: bool) -> None:
    assert passes(reward, threshold) is passed


def test_pass_at_k_and_mean_at_k_on_a_small_grid() -> None:
    metrics = board([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.5, 1.0, 0.0]]).agent_metrics(
        "a", pass_threshold=None
    )
    assert metrics["pass@3"] == pytest.approx(2 / 3)
    assert metrics["mean@3"] == pytest.approx((1 / 3 + 0 + 0.5) / 3)
    assert metrics["pass@1"] == pytest.approx(3 / 9)
    assert metrics["mean_reward"] == pytest.approx(2.5 / 9)
    assert metrics["tasks_complete"] == 3
    assert metrics["tasks_incomplete"] == 0


def test_threshold_changes_what_passes() -> None:
    metrics = board([[1.0, 0.0], [0.5, 0.5]]).agent_metrics("a", pass_threshold=1.0)
    assert metrics["pass@2"] == pytest.approx(0.5)
    assert metrics["pass@1"] == pytest.approx(0.25)


def test_tasks_with_failed_rollouts_are_left_out_of_pass_at_k() -> None:
    metrics = board([[1.0, None], [0.0, 0.0], [None, None]]).agent_metrics("a", pass_threshold=None)
    assert metrics["pass@2"] == 0.0  # only task 1 is complete, and it never passed
    assert metrics["mean@2"] == 0.0
    assert metrics["tasks_complete"] == 1
    assert metrics["tasks_incomplete"] == 2
    assert metrics["rollouts"] == 3
    assert metrics["failed"] == 3
    assert metrics["failures"] == {"timeout": 3}
    assert metrics["pass@1"] == pytest.approx(1 / 3)


def test_single_repeat_has_no_pass_at_k() -> None:
    metrics = board([[1.0], [0.0]]).agent_metrics("a", pass_threshold=None)
    assert "pass@1" in metrics
    assert "mean@1" not in metrics
    assert "tasks_complete" not in metrics


def test_nothing_done_gives_none_not_zero() -> None:
    metrics = board([[None, None]]).agent_metrics("a", pass_threshold=None)
    assert metrics["mean_reward"] is None
    assert metrics["pass@1"] is None
    assert metrics["pass@2"] is None


def test_metrics_are_per_agent() -> None:
    scoreboard = board([[1.0, 1.0], [0.0, 0.0], [0.0, 1.0]], agents=[0, 1, 1])
    a = scoreboard.agent_metrics("a", pass_threshold=None)
    b = scoreboard.agent_metrics("b", pass_threshold=None)
    assert (a["rollouts"], a["pass@2"], a["mean@2"]) == (2, 1.0, 1.0)
    assert (b["rollouts"], b["pass@2"], b["mean@2"]) == (4, 0.5, 0.25)
    assert scoreboard.mean_reward() == pytest.approx(3 / 6)


def test_matches_a_brute_force_count_on_random_grids() -> None:
    rng = random.Random(7)
    for _ in range(20):
        k = rng.randint(2, 5)
        grid = [[rng.choice([None, 0.0, 0.3, 1.0]) for _ in range(k)] for _ in range(rng.randint(1, 30))]
        metrics = board(grid).agent_metrics("a", pass_threshold=None)
        complete = [row for row in grid if None not in row]
        done = [r for r in itertools.chain.from_iterable(grid) if r is not None]
        expected_pass = sum(any(r > 0 for r in row) for row in complete) / len(complete) if complete else None
        expected_mean = sum(sum(row) / k for row in complete) / len(complete) if complete else None
        assert metrics[f"pass@{k}"] == pytest.approx(expected_pass)
        assert metrics[f"mean@{k}"] == pytest.approx(expected_mean)
        assert metrics["rollouts"] == len(done)


def test_duplicates_are_counted_not_double_scored() -> None:
    scoreboard = board([[1.0]])
    assert scoreboard.record(outcome(0, 0, 0.0)) is False
    assert scoreboard.duplicates == 1
    assert scoreboard.mean_reward() == 1.0


def test_tokens_and_incomplete_reasons_are_tallied() -> None:
    scoreboard = Scoreboard(num_tasks=2, num_repeats=1, agents=["a"], task_agents=[0, 0])
    scoreboard.record(outcome(0, 0, 0.0, tokens=5, reason="context_length_exceeded"))
    scoreboard.record(outcome(1, 0, 1.0, tokens=7))
    metrics = scoreboard.agent_metrics("a", pass_threshold=None)
    assert metrics["output_tokens"] == 12
    assert metrics["incomplete"] == {"context_length_exceeded": 1}
    assert scoreboard.is_done(0, 0)
    assert scoreboard.done == 2
    assert not math.isnan(scoreboard.mean_reward() or math.nan)


def test_token_drift_is_counted_per_agent_only_for_rollouts_with_token_ids() -> None:
    scoreboard = Scoreboard(num_tasks=3, num_repeats=1, agents=["a"], task_agents=[0, 0, 0])
    for task, drift in enumerate([True, False, None]):
        scoreboard.record(Outcome(task, 0, 1.0, 0, None, token_drift=drift))
    assert scoreboard.agent_metrics("a", pass_threshold=None)["token_ids"] == {"rollouts": 2, "drifted": 1}
    plain = Scoreboard(num_tasks=1, num_repeats=1, agents=["a"], task_agents=[0])
    plain.record(outcome(0, 0, 1.0))
    assert "token_ids" not in plain.agent_metrics("a", pass_threshold=None)
