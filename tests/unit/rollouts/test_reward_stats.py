"""Our reward statistics equal NeMo Gym 0.7.0's on the same rollouts (expected values from its code)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ng_cli.rollouts.reward_stats import aggregate_metrics, profile_from_data, t_interval

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nemo_gym_metrics"
CASES = ["three_by_three", "single_repeat"]


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def same(ours: Any, theirs: Any, where: str = "") -> None:
    """Equal structure, keys and values (floats to 1e-9 relative: pandas sums in another order)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), where
        assert sorted(ours) == sorted(theirs), f"{where}: keys differ: {set(ours) ^ set(theirs)}"
        for key in theirs:
            same(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list), where
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(theirs, float):
        assert math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12), f"{where}: {ours} != {theirs}"
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


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
