"""The files NeMo Gym users' scripts read beside the output: `_materialized_inputs.jsonl`,
`_aggregate_metrics.json`; and NeMo Gym's row options (`agent_map`, the seed's place), over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.rollouts import CollectConfig, collect_rollouts
from ng_cli.rollouts.environment_metrics import aggregate_metrics
from ng_cli.rollouts.progress import NullView
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.rollouts.stub_agent import StubAgent

pytestmark = pytest.mark.integration


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


async def test_materialized_inputs_and_aggregate_metrics_are_written(tmp_path: Path) -> None:
    agent = StubAgent()
    rows = [
        {
            "id": i,
            "responses_create_params": {"input": f"q{i}"},
            "expected_reward": float(i % 2),
            "agent_ref": "old",
        }
        for i in range(3)
    ]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    with serve_in_thread(agent.build_app()) as url:
        config = CollectConfig(
            agent_map={"old": "stub"},
            agent_urls={"stub": url},
            input_jsonl_fpath=source,
            output_jsonl_fpath=tmp_path / "out.jsonl",
            num_repeats=2,
            num_repeats_add_seed=True,
            responses_create_params={"temperature": 0.5},
        )
        result = await collect_rollouts(config, view=NullView())
    assert (result.succeeded, result.failed) == (6, 0)
    assert sum(agent.calls.values()) == 6  # agent_map sent every row of "old" to "stub"

    materialized = read_jsonl(tmp_path / "out_materialized_inputs.jsonl")
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in materialized] == [
        (t, k) for t in range(3) for k in range(2)
    ]  # NeMo Gym's order: each task's repeats together
    first = materialized[1]
    assert first["agent_ref"] == {"type": "responses_api_agents", "name": "stub"}
    assert first["responses_create_params"] == {
        "input": "q0",
        "temperature": 0.5,
        "metadata": {"extra_body": '{"seed": 1}'},
    }
    received = sorted(agent.received, key=lambda r: (r["_ng_task_index"], r["_ng_rollout_index"]))
    assert received == materialized  # the /run bodies carry the indices, as NeMo Gym's do
    outputs = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in read_jsonl(tmp_path / "out.jsonl")}
    for row in materialized:  # each line is what the agent was sent (the stub echoes it back)
        sent = outputs[(row["_ng_task_index"], row["_ng_rollout_index"])]
        assert {key: sent[key] for key in row} == row

    (entry,) = orjson.loads((tmp_path / "out_aggregate_metrics.json").read_bytes())
    assert entry["agent_ref"] == {"name": "stub"}
    assert sorted(entry) == [
        "agent_metrics",
        "agent_ref",
        "group_level_metrics",
        "key_metrics",
        "repeat_level_metrics",
    ]
    assert entry["agent_metrics"]["mean/reward"] == pytest.approx(1 / 3)
    assert entry["agent_metrics"]["num_repeats"] == 2
    assert entry["key_metrics"]["mean/reward"] == pytest.approx(1 / 3)
    assert [group["_ng_task_index"] for group in entry["group_level_metrics"]] == [0, 1, 2]
    assert len(entry["repeat_level_metrics"]) == 2
    expected = aggregate_metrics(
        sorted(outputs.values(), key=lambda r: (r["_ng_task_index"], r["_ng_rollout_index"]))
    )
    assert entry["agent_metrics"] == expected["agent_metrics"]


async def test_overwrite_removes_nemo_gyms_files_with_the_others(tmp_path: Path) -> None:
    agent = StubAgent()
    source = tmp_path / "in.jsonl"
    source.write_bytes(orjson.dumps({"id": 0, "responses_create_params": {"input": "q"}}) + b"\n")
    with serve_in_thread(agent.build_app()) as url:
        config = CollectConfig(
            agent_name="stub",
            agent_urls={"stub": url},
            input_jsonl_fpath=source,
            output_jsonl_fpath=tmp_path / "o.jsonl",
        )
        await collect_rollouts(config, view=NullView())
        assert (tmp_path / "o_materialized_inputs.jsonl").is_file()
        assert (tmp_path / "o_aggregate_metrics.json").is_file()
        again = config.model_copy(update={"overwrite": True, "num_repeats": 2})
        await collect_rollouts(again, view=NullView())
    assert len(read_jsonl(tmp_path / "o_materialized_inputs.jsonl")) == 2
