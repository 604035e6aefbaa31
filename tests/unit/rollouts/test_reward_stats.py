"""Our reward statistics equal NeMo Gym 0.7.0's on the same rollouts (expected values from its code)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ng_cli.rollouts.environment_metrics import aggregate_metrics
from ng_cli.rollouts.reward_stats import profile_from_data, t_interval
from tests.fixtures.nemo_gym_metrics.compare import load, same

CASES = ["three_by_three", "single_repeat"]


def stripped(result: dict[str, Any]) -> dict[str, Any]:
    """What NeMo Gym's collector posts to /aggregate_metrics for one rollout."""
    entry = {k: v for k, v in result.items() if k not in ("response", "responses_create_params")}
    meta = {k: result["response"][k] for k in ("usage", "incomplete_details") if result["response"].get(k)}
    return {**entry, "response": meta} if meta else entry


@pytest.mark.parametrize("case", CASES)
def test_aggregate_metrics_equal_nemo_gyms_default(case: str) -> None:
    expected = load(f"{case}_aggregate.json")
    ours = aggregate_metrics([stripped(r) for r in load(f"{case}_rollouts.json")])
    assert expected.pop("perf_summary") is None  # no rollout carries ng_perf
    assert ours.pop("perf_summary") is None
    same(ours, expected, case)


@pytest.mark.parametrize("case", CASES)
def test_reward_profile_equals_nemo_gyms(case: str) -> None:
    expected = load(f"{case}_profile.json")
    group, agent, repeat = profile_from_data(
        load(f"{case}_materialized_inputs.json"), load(f"{case}_rollouts.json")
    )
    same({"reward_profiling": group, "agent_metrics": agent, "repeat_level_metrics": repeat}, expected, case)


@pytest.mark.parametrize(
    ("n", "error", "expected"),
    [(2, 1.0, 12.706204736174694), (3, 0.5, 4.302652729749462 * 0.5), (30, 2.0, 2.045229642132703 * 2)],
)
def test_t_interval_matches_scipy(n: int, error: float, expected: float) -> None:
    """Half-widths from scipy.stats.t.ppf(0.975, n - 1) * error."""
    low, high = t_interval(10.0, error, n) or (0.0, 0.0)
    assert math.isclose(high - 10.0, expected, rel_tol=1e-9)
    assert math.isclose(10.0 - low, expected, rel_tol=1e-9)
    assert t_interval(1.0, 0.0, 5) == (1.0, 1.0)
    assert t_interval(1.0, 1.0, 1) is None
