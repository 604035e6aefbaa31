"""`ng_aggregate_rollouts`: NeMo Gym's `+input_glob` over shards -> merged rollouts + aggregate metrics."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from ng_cli.commands.aggregate_rollouts import app
from ng_cli.rollouts.aggregate import expand_input_glob
from ng_cli.rollouts.materialized import aggregate_entries
from tests.fixtures.nemo_gym_metrics.compare import load, same
from tests.fixtures.rollouts.rollout_rows import write_jsonl

pytestmark = pytest.mark.usefixtures("empty_env_yaml")


def test_glob_lists_sorted_deduplicated_shards_without_sidecars(tmp_path: Path) -> None:
    for name in ("r-b.jsonl", "r-a.jsonl", "r-a_failures.jsonl", "r-a_materialized_inputs.jsonl"):
        (tmp_path / name).write_text("")
    assert expand_input_glob(f"{tmp_path}/r-*.jsonl, {tmp_path}/r-a.jsonl") == [
        tmp_path / "r-a.jsonl",
        tmp_path / "r-b.jsonl",
    ]


def test_shards_merge_and_their_metrics_equal_nemo_gyms(tmp_path: Path) -> None:
    rows = load("three_by_three_rollouts.json")
    write_jsonl(tmp_path / "shard-1.jsonl", rows[::2])
    write_jsonl(tmp_path / "shard-0.jsonl", rows[1::2])
    merged = tmp_path / "all.jsonl"
    result = CliRunner().invoke(
        app, [f"+input_glob={tmp_path}/shard-*.jsonl", f"+output_jsonl_fpath={merged}"]
    )
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(line) for line in merged.read_bytes().splitlines()]
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in lines] == sorted(
        (r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows
    )
    (entry,) = orjson.loads((tmp_path / "all_aggregate_metrics.json").read_bytes())
    assert entry["agent_ref"] == {"name": "math_simple_agent"}
    expected = load("three_by_three_aggregate.json")
    for key in ("agent_metrics", "key_metrics", "group_level_metrics", "repeat_level_metrics"):
        same(entry[key], expected[key], key)
    assert aggregate_entries(lines) == [entry]


def test_an_output_that_is_a_shard_is_refused(tmp_path: Path) -> None:
    shard = write_jsonl(tmp_path / "r.jsonl", load("single_repeat_rollouts.json"))
    before = shard.read_bytes()
    result = CliRunner().invoke(app, [f"+input_glob={tmp_path}/*.jsonl", f"+output_jsonl_fpath={shard}"])
    assert result.exit_code == 2
    assert "is the same file as" in result.output
    assert shard.read_bytes() == before


def test_no_match_and_nemo_gyms_health_checks_are_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, [f"+input_glob={tmp_path}/none-*.jsonl", f"+output_jsonl_fpath={tmp_path}/o.jsonl"]
    )
    assert result.exit_code == 2
    assert "No shards matched" in result.output
    result = CliRunner().invoke(
        app,
        [
            f"+input_glob={tmp_path}/x.jsonl",
            f"+output_jsonl_fpath={tmp_path}/o.jsonl",
            "+health_check_workers=2",
        ],
    )
    assert result.exit_code == 2
    assert "health_check_workers: not offered" in result.output
