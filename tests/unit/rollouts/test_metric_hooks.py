"""Each agent's metrics run its environment's own hooks, found from the config (`metric_hooks`).

A native environment's `metric_hooks` (math_with_judge's), a NeMo Gym environment's own methods
(`false_statement_judge`, NeMo Gym's code unchanged), and NeMo Gym's defaults for an agent the
config does not describe. The budget of `dispatch_budget_s` and the NeMo Gym failure classes of
`count_failure_classes_as_zero` are checked here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ng_cli.rollouts.budget import DispatchBudget
from ng_cli.rollouts.counted_zeros import counted_zeros, nemo_gym_failure_class
from ng_cli.rollouts.environment_metrics import aggregate_metrics
from ng_cli.rollouts.metric_hooks import MetricHooks, hooks_by_agent

NEMO_GYM_SERVERS = Path(__file__).resolve().parents[2] / "fixtures" / "nemo_gym_servers"


def stack(environment: str, implementation: str, agent: str = "agent") -> dict[str, Any]:
    return {
        environment: {"resources_servers": {implementation: {"entrypoint": "app.py"}}},
        agent: {
            "responses_api_agents": {
                "simple_agent": {
                    "entrypoint": "app.py",
                    "resources_server": {"type": "resources_servers", "name": environment},
                    "model_server": {"type": "responses_api_models", "name": "policy_model"},
                }
            }
        },
    }


def rollouts(**fields: Any) -> list[dict[str, Any]]:
    usage = {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}
    return [
        {
            "_ng_task_index": t,
            "_ng_rollout_index": r,
            "reward": float((t + r) % 2),
            "response": {"usage": usage},
        }
        | fields
        for t in range(3)
        for r in range(2)
    ]


def test_a_native_environment_runs_its_own_hooks() -> None:
    hooks = hooks_by_agent(stack("math_with_judge", "math_with_judge"))
    rows = rollouts(library_reward=1.0, extracted_answer="4")
    key = aggregate_metrics(rows, hooks["agent"])["key_metrics"]
    assert set(key) == {
        "mean/input_tokens",
        "mean/output_tokens",
        "pass@1[avg-of-2]/symbolic_accuracy",
        "pass@1[avg-of-2]/no_answer",
        "pass@2/symbolic_accuracy",
        "majority@2/symbolic_accuracy",
    }
    assert key["pass@2/symbolic_accuracy"] == 100.0


def test_a_nemo_gym_environment_runs_its_own_methods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(NEMO_GYM_SERVERS)  # its implementation folders are found from the working directory
    hooks = hooks_by_agent(stack("judge", "false_statement_judge"))
    rows = rollouts(judge_points=2)
    metrics = aggregate_metrics(rows, hooks["agent"])
    assert metrics["agent_metrics"]["pass@1[avg-of-2]/recognized_false"] == 100.0
    assert set(metrics["key_metrics"]) == {
        "mean/input_tokens",
        "mean/output_tokens",
        *(
            f"pass@1[avg-of-2]/{name}"
            for name in ("score", "recognized_false", "partial_credit", "sycophantic")
        ),
        "pass@1[avg-of-2]/no_judge_score",
    }


def test_an_agent_the_config_does_not_describe_gets_nemo_gyms_defaults() -> None:
    assert hooks_by_agent({}) == {}
    key = aggregate_metrics(rollouts(), MetricHooks())["key_metrics"]
    assert set(key) == {"mean/reward", "mean/input_tokens", "mean/output_tokens", "mean/total_tokens"}


def test_a_spent_budget_or_a_margin_larger_than_it_starts_nothing() -> None:
    assert DispatchBudget(3600).allows_start()
    for budget in (DispatchBudget(0), DispatchBudget(60, margin_s=120)):
        assert not budget.allows_start()
        assert budget.drained == 1


def test_the_adaptive_margin_is_the_p75_once_five_rollouts_finished() -> None:
    budget = DispatchBudget(3600)
    for duration_s in (1.0, 2.0, 3.0, 4.0):
        budget.record(duration_s)
    assert budget.margin() is None
    budget.record(5.0)
    assert budget.margin() == 4.0  # NeMo Gym's DispatchLatencyTracker: linear between ranks
    for _ in range(3):  # rollouts far longer than the budget: none is worth starting now
        budget.record(10_000.0)
    assert budget.margin() == 10_000.0
    assert not budget.allows_start()


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (500, "agent_run_error"),
        (400, "agent_run_error"),
        (429, "agent_request_failed"),
        (503, "agent_request_failed"),
        (None, "agent_request_failed"),
    ],
)
def test_failures_get_nemo_gyms_class(status: int | None, expected: str) -> None:
    assert nemo_gym_failure_class({"status": status}) == expected


def test_zeros_carry_the_task_fields_real_rows_carry(tmp_path: Path) -> None:
    materialized = tmp_path / "m.jsonl"
    materialized.write_text(
        "".join(
            f'{{"_ng_task_index": {t}, "_ng_rollout_index": 0, "agent_ref": {{"name": "a"}}, '
            f'"subset": "s{t}", "weight": 2, "responses_create_params": {{}}}}\n'
            for t in range(3)
        )
    )
    real = [
        {
            "_ng_task_index": 0,
            "_ng_rollout_index": 0,
            "agent_ref": {"name": "a"},
            "reward": 1.0,
            "subset": "s0",
        }
    ]
    failure = {"_ng_task_index": 1, "_ng_rollout_index": 0, "agent": "a", "kind": "timeout", "status": None}
    zeros = counted_zeros(
        real, [failure], materialized, failure_classes=["agent_request_failed"], count_missing=True
    )
    assert (zeros.failures, zeros.missing) == (1, 1)
    by_task = {row["_ng_task_index"]: row for row in zeros.rows}
    assert by_task[1] == {
        "_ng_task_index": 1,
        "_ng_rollout_index": 0,
        "agent_ref": {"name": "a"},
        "reward": 0.0,
        "mask_sample": False,
        "subset": "s1",  # carried by real rows; `weight` is not, so it would become a metric of its own
    }
    assert by_task[2]["subset"] == "s2"
    assert "mask_sample" not in by_task[2]
