"""Write cases/aggregate_metrics.json: NeMo Gym 0.7.0's `/aggregate_metrics` of made-up rollouts.

Not a test: `test_aggregate_metrics.py` reads what this wrote. The rollouts are made here from
`cases/math_with_judge.json` (each rollout's `reward`, `library_reward` and `extracted_answer` are
what NeMo Gym's math_with_judge verify answered for one of those cases), with usage, judge,
`ng_perf` and `mask_sample` fields varied across rollouts. What runs is NeMo Gym's own code, as
its collector and servers call it:

* the collector's strip of each rollout (`RolloutCollectionHelper._call_aggregate_metrics`:
  `response` cut to `usage` and `incomplete_details`, heavy fields dropped);
* `SimpleResourcesServer.aggregate_metrics` of `LibraryJudgeMathResourcesServer` (its
  `compute_metrics`, `get_key_metrics`, `compute_repeat_metrics` hooks), i.e.
  `reward_profile.compute_aggregate_metrics`, on an instance built without config (the hooks read
  none); and, for an agent with no hooks, the default (`compute_aggregate_metrics` alone).

NeMo Gym's reward profile needs pandas and scipy (real ones) and W&B's `Histogram` (stubbed:
histograms are dropped before serialisation). From outside the repo, NeMo Gym's wheel unpacked
as in README.md:

    pip install --no-deps --target /tmp/ng-deps pandas numpy scipy python-dateutil pytz tzdata
    cd /tmp && PYTHONPATH=/tmp/ng-deps python <repo>/tests/compat/nemo_gym_metrics_oracle.py \\
        --nemo-gym /tmp/nemo_gym_0.7.0
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import sys
import types
from pathlib import Path
from typing import Any

import nemo_gym_oracle  # beside this script
from case_files import CASES, load_cases

_STUBBED = ("yappi", "pydot", "docstring_parser")
"""Imported by NeMo Gym's server base modules, never called on this path."""
_HEAVY = (
    "response",
    "responses_create_params",
    "ng_agent_observations",
    "ng_model_call_capture",
    "ng_trajectory",
)


def _stub_modules() -> None:
    nemo_gym_oracle.UNUSED_IMPORTS = _STUBBED  # a call into one of them stops the run
    sys.meta_path.append(nemo_gym_oracle._UnusedFinder())
    wandb = types.ModuleType("wandb")

    class Histogram:  # what RewardProfiler.histogram builds; dropped before serialisation
        def __init__(self, *_args: Any, **_kwargs: Any) -> None:
            pass

    wandb.Histogram = Histogram  # type: ignore[attr-defined]
    sys.modules["wandb"] = wandb


def _verdicts() -> list[dict[str, Any]]:
    return [case["nemo_gym"] for case in load_cases("math_with_judge")]


def _rollout(task: int, rollout: int, agent: str, verdict: dict[str, Any], *, k: int) -> dict[str, Any]:
    usage = {
        "input_tokens": 20 + task,
        "input_tokens_details": {"cached_tokens": task % 2},
        "output_tokens": 5 * rollout + task + 1,
        "output_tokens_details": {"reasoning_tokens": rollout},
        "total_tokens": 20 + task + 5 * rollout + task + 1,
    }
    row: dict[str, Any] = {
        "responses_create_params": {"input": [{"role": "user", "content": f"Question {task}?"}]},
        "expected_answer": f"answer {task}",
        "agent_ref": {"name": agent},
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "response": {
            "id": f"resp_{task}_{rollout}",
            "output": [],
            "usage": usage,
            "incomplete_details": None,
        },
        **verdict,
    }
    if (task + rollout) % 5 == 3:  # the judge decided this one (NeMo Gym's judge_evaluations, our judge_used)
        row["judge_evaluations"] = [{"verdict": "equal" if row["reward"] else "not_equal"}]
        row["judge_used"] = True
    elif k > 1:
        row["judge_used"] = False
    return row


def _cases() -> list[dict[str, Any]]:
    verdicts = _verdicts()
    cases = []
    for case_id, tasks, k in (("math_6x4", 6, 4), ("math_5x1", 5, 1), ("math_3x2_perf_mask", 3, 2)):
        rows = [
            _rollout(t, r, "math_agent", verdicts[(t * k + r) % len(verdicts)], k=k)
            for t in range(tasks)
            for r in range(k)
        ]
        if case_id == "math_3x2_perf_mask":
            rows[1]["mask_sample"] = True
            del rows[4]["library_reward"]
            for i, row in enumerate(rows[:4]):
                row["ng_perf"] = {
                    "num_turns": 1 + i % 2,
                    "num_tool_calls": i,
                    "token_observability_coverage": 1.0 if i else 0.0,
                    "prompt_tokens": 100 + i,
                    "completion_tokens": 10 * (i + 1),
                    "total_latency_ms": 250.0 + 10 * i,
                }
        cases.append({"id": case_id, "hooks": "math_with_judge", "rows": rows})
    default = [_rollout(t, r, "plain_agent", verdicts[t + r], k=2) for t in range(3) for r in range(2)]
    cases.append({"id": "default_hooks_3x2", "hooks": None, "rows": default})
    return cases


def _stripped(row: dict[str, Any]) -> dict[str, Any]:
    entry = {k: v for k, v in row.items() if k not in _HEAVY}
    response = row.get("response") or {}
    kept = {k: response[k] for k in ("usage", "incomplete_details") if response.get(k) is not None}
    if kept:
        entry["response"] = kept
    return entry


def _nemo_gym_metrics(case: dict[str, Any]) -> dict[str, Any]:
    from nemo_gym.config_types import AggregateMetricsRequest
    from nemo_gym.reward_profile import compute_aggregate_metrics

    body = AggregateMetricsRequest(verify_responses=[_stripped(row) for row in case["rows"]])
    if case["hooks"] is None:
        return compute_aggregate_metrics(body.verify_responses).model_dump(mode="json")
    from resources_servers.math_with_judge.app import LibraryJudgeMathResourcesServer

    server = LibraryJudgeMathResourcesServer.__new__(LibraryJudgeMathResourcesServer)  # no config, no init
    answer = asyncio.run(LibraryJudgeMathResourcesServer.aggregate_metrics(server, body))
    return answer.model_dump(mode="json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nemo-gym", type=Path, required=True, help="NeMo Gym's root (its wheel, unpacked)")
    args = parser.parse_args()
    _stub_modules()
    root = args.nemo_gym.resolve()
    sys.path.insert(0, str(root))
    for folder in ("resources_servers", "responses_api_models", "responses_api_agents"):
        package = types.ModuleType(folder)  # NeMo Gym's folders, not this project's of the same names
        package.__path__ = [str(root / folder)]
        sys.modules[folder] = package
    from nemo_gym import __version__

    cases = _cases()
    for case in cases:
        case["nemo_gym"] = _nemo_gym_metrics(case)
    oracle = {
        "nemo_gym": __version__,
        **{pin: importlib.metadata.version(pin) for pin in ("pandas", "scipy")},
    }
    path = CASES / "aggregate_metrics.json"
    path.write_text(json.dumps({"oracle": oracle, "cases": cases}, indent=1, ensure_ascii=False) + "\n")
    print(f"{path.name}: {len(cases)} cases")


if __name__ == "__main__":
    main()
