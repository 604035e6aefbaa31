"""`ng_aggregate_rollouts`' shards: only regular files are read, indices are integers, each rollout counts once."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner, Result

from ng_cli.commands.aggregate_rollouts import app
from ng_cli.rollouts.materialized import aggregate_entries
from tests.fixtures.nemo_gym_metrics.compare import load
from tests.fixtures.rollouts.rollout_rows import write_jsonl

pytestmark = pytest.mark.usefixtures("empty_env_yaml")


def aggregate(tmp_path: Path, pattern: str = "r-*.jsonl") -> tuple[Result, Path]:
    merged = tmp_path / "out" / "all.jsonl"
    merged.parent.mkdir(exist_ok=True)
    result = CliRunner().invoke(app, [f"+input_glob={tmp_path}/{pattern}", f"+output_jsonl_fpath={merged}"])
    return result, merged


def nothing_written(merged: Path) -> bool:
    return list(merged.parent.iterdir()) == []


def test_a_directory_matched_by_the_glob_is_refused_by_name(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "r-0.jsonl", load("three_by_three_rollouts.json"))
    (tmp_path / "r-1.jsonl").mkdir()
    result, merged = aggregate(tmp_path)
    assert result.exit_code == 2, result.output
    assert f"{tmp_path / 'r-1.jsonl'}: a directory, not a rollouts file" in result.output
    assert "nothing was read or written" in result.output
    assert "Traceback" not in result.output
    assert nothing_written(merged)


def test_a_fifo_matched_by_the_glob_is_refused_without_being_opened(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "r-0.jsonl", load("three_by_three_rollouts.json"))
    fifo = tmp_path / "r-1.jsonl"
    os.mkfifo(fifo)
    # A writer waits for a reader: if the command opens the FIFO, this open returns, and the writer
    # closes at once so the command reads an empty shard instead of waiting forever.
    opened = threading.Event()

    def writer() -> None:
        with open(fifo, "wb"):
            opened.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    result, merged = aggregate(tmp_path)
    was_opened = opened.is_set()
    os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # lets the writer's open return
    thread.join()
    assert not was_opened, "the command opened the FIFO"
    assert result.exit_code == 2, result.output
    assert f"{fifo}: a FIFO (named pipe), not a rollouts file" in result.output
    assert nothing_written(merged)


def test_a_dangling_symlink_is_refused_by_name(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "r-0.jsonl", load("three_by_three_rollouts.json"))
    (tmp_path / "r-1.jsonl").symlink_to(tmp_path / "gone.jsonl")
    result, merged = aggregate(tmp_path)
    assert result.exit_code == 2, result.output
    assert f"{tmp_path / 'r-1.jsonl'}: cannot be read (No such file or directory)" in result.output
    assert nothing_written(merged)


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("_ng_task_index", "1", '"1" (str)'),
        ("_ng_task_index", 1.0, "1.0 (float)"),
        ("_ng_rollout_index", True, "true (bool)"),
        ("_ng_rollout_index", -1, "-1 (int)"),
    ],
)
def test_an_index_that_is_not_an_integer_is_refused_with_its_file_and_line(
    tmp_path: Path, key: str, value: Any, shown: str
) -> None:
    rows = load("three_by_three_rollouts.json")
    write_jsonl(tmp_path / "r-0.jsonl", rows[:4])
    write_jsonl(tmp_path / "r-1.jsonl", [*rows[4:6], {**rows[6], key: value}, rows[7]])
    result, merged = aggregate(tmp_path)
    assert result.exit_code == 2, result.output
    assert f"{tmp_path / 'r-1.jsonl'}:3: {key} must be an integer >= 0, got {shown}" in result.output
    assert "Traceback" not in result.output
    assert nothing_written(merged)


def test_a_rollout_in_two_shards_with_the_same_contents_counts_once_and_names_both(tmp_path: Path) -> None:
    rows = load("three_by_three_rollouts.json")
    write_jsonl(tmp_path / "r-0.jsonl", rows[:5])
    write_jsonl(tmp_path / "r-1.jsonl", rows[3:])  # rows 3 and 4 in both
    result, merged = aggregate(tmp_path)
    assert result.exit_code == 0, result.output
    assert (
        f"warning: {tmp_path / 'r-1.jsonl'} repeats 2 rollout(s) of {tmp_path / 'r-0.jsonl'} with the same "
        f"contents (the first: task {rows[3]['_ng_task_index']}, rollout {rows[3]['_ng_rollout_index']} of "
        f"agent 'math_simple_agent': {tmp_path / 'r-0.jsonl'}:4 and {tmp_path / 'r-1.jsonl'}:1)"
    ) in result.output
    assert f"{len(rows)} rollouts (2 repeated row(s) counted once)" in result.output
    lines = [orjson.loads(line) for line in merged.read_bytes().splitlines()]
    keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in lines]
    assert keys == sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)
    metrics = orjson.loads((merged.parent / "all_aggregate_metrics.json").read_bytes())
    assert metrics == aggregate_entries(rows)


def test_a_rollout_twice_in_one_shard_counts_once(tmp_path: Path) -> None:
    rows = load("three_by_three_rollouts.json")
    write_jsonl(tmp_path / "r-0.jsonl", [*rows, rows[0]])
    result, merged = aggregate(tmp_path)
    assert result.exit_code == 0, result.output
    assert f"{tmp_path / 'r-0.jsonl'} repeats 1 rollout(s) of itself" in result.output
    assert len(merged.read_bytes().splitlines()) == len(rows)


def test_a_rollout_in_two_shards_with_different_contents_is_refused_naming_both(tmp_path: Path) -> None:
    rows = load("three_by_three_rollouts.json")
    write_jsonl(tmp_path / "r-0.jsonl", rows)
    write_jsonl(tmp_path / "r-1.jsonl", [{**rows[2], "reward": 1 - rows[2]["reward"]}])
    result, merged = aggregate(tmp_path)
    assert result.exit_code == 2, result.output
    assert "1 rollout(s) appear twice with different contents, so nothing was written" in result.output
    assert f"{tmp_path / 'r-0.jsonl'}:3 and {tmp_path / 'r-1.jsonl'}:1" in result.output
    assert nothing_written(merged)


def test_the_same_indices_under_two_agents_are_two_rollouts(tmp_path: Path) -> None:
    rows = load("three_by_three_rollouts.json")
    other: list[dict[str, Any]] = [{**row, "agent_ref": {"name": "other_agent"}} for row in rows]
    write_jsonl(tmp_path / "r-0.jsonl", rows)
    write_jsonl(tmp_path / "r-1.jsonl", other)
    result, merged = aggregate(tmp_path)
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    assert len(merged.read_bytes().splitlines()) == 2 * len(rows)
    entries = orjson.loads((merged.parent / "all_aggregate_metrics.json").read_bytes())
    assert [entry["agent_ref"]["name"] for entry in entries] == ["math_simple_agent", "other_agent"]
