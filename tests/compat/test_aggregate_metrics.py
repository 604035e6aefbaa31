"""`ng_aggregate_rollouts`' metrics equal NeMo Gym 0.7.0's `/aggregate_metrics` on the same rollouts.

`cases/aggregate_metrics.json` holds made-up rollouts and what NeMo Gym's own code answered for
them (`nemo_gym_metrics_oracle.py`): math_with_judge's server with its metric hooks (pass@k,
majority@k, `per_sample_aggregate`, its key metrics), masked samples, `ng_perf` records, and an
agent without hooks (the defaults). Ours: the rows as one shard, aggregated with a config whose
agent names our math_with_judge environment. Every number must be equal, and of the same type:
NeMo Gym writes `max/input_tokens` as 12.0, never 12.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.rollouts.aggregate import AggregateConfig, aggregate_rollouts
from tests.compat.case_files import load_cases

CASES = load_cases("aggregate_metrics")
_COMPARED = ("agent_metrics", "key_metrics", "group_level_metrics", "repeat_level_metrics")


def _stack(agent: str) -> dict[str, Any]:
    """A config whose agent `agent` names the math_with_judge environment."""
    return {
        "math_with_judge": {
            "resources_servers": {"math_with_judge": {"entrypoint": "app.py", "domain": "math"}}
        },
        agent: {
            "responses_api_agents": {
                "simple_agent": {
                    "entrypoint": "app.py",
                    "resources_server": {"type": "resources_servers", "name": "math_with_judge"},
                    "model_server": {"type": "responses_api_models", "name": "policy_model"},
                }
            }
        },
    }


def same(ours: Any, theirs: Any, where: str) -> None:
    """Equal keys and values, floats to 1e-9 relative (pandas sums in another order), and the
    same JSON type: a float is never an int."""
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
        assert isinstance(ours, float), f"{where}: {ours!r} is not a float as NeMo Gym's {theirs!r}"
        assert math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12), f"{where}: {ours} != {theirs}"
    else:
        assert type(ours) is type(theirs), f"{where}: {ours!r} is not a {type(theirs).__name__}"
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_aggregate_metrics_equal_nemo_gyms(case: dict[str, Any], tmp_path: Path) -> None:
    shard = tmp_path / "rollouts-0.jsonl"
    shard.write_bytes(b"".join(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE) for row in case["rows"]))
    agent = case["rows"][0]["agent_ref"]["name"]
    config = AggregateConfig(input_glob=str(shard), output_jsonl_fpath=tmp_path / "all.jsonl")
    result = aggregate_rollouts(config, stack=_stack(agent) if case["hooks"] else {})
    (entry,) = json.loads(result.metrics.read_text())  # through the file, as scripts read it
    theirs = case["nemo_gym"]
    for key in _COMPARED:
        same(entry[key], theirs[key], f"{case['id']}.{key}")
    same(entry.get("perf_summary"), theirs["perf_summary"], f"{case['id']}.perf_summary")  # absent: None


def test_the_math_hooks_give_what_the_defaults_do_not() -> None:
    """The recorded headline numbers are the hooks' (pass@k, majority@k), not `mean/*`."""
    theirs = next(case for case in CASES if case["id"] == "math_6x4")["nemo_gym"]
    assert "pass@4/symbolic_accuracy" in theirs["key_metrics"]
    assert "majority@4/symbolic_accuracy" in theirs["key_metrics"]
    assert "per_sample_aggregate" in theirs["agent_metrics"]
    assert "mean/reward" not in theirs["key_metrics"]
