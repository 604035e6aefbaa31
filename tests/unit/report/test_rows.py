"""Reading a rollouts file: every bad line is named with its number, and the rest is still read."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.errors import DataError
from ng_cli.report.rows import Problems, read_rows
from tests.fixtures.rollouts.rollout_rows import rollout_row, write_jsonl


def read(path: Path) -> tuple[list[int], Problems]:
    problems = Problems(path)
    return [row.line for row in read_rows(path, problems)], problems


def test_a_torn_last_line_is_named_and_the_rest_read(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "out.jsonl",
        [rollout_row(0, 0, 1.0), rollout_row(1, 0, 0.0)],
        tail=b'{"reward": 1.0, "resp',
    )
    lines, problems = read(path)
    assert lines == [1, 2]
    assert problems.shown == [f"{path}:3: torn last line (no newline, incomplete JSON)"]


def test_a_complete_last_row_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    write_jsonl(path, [rollout_row(0, 0, 1.0)])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert read(path) == ([1], Problems(path))


def test_rows_of_another_schema_are_skipped_with_their_keys(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "out.jsonl",
        [rollout_row(0, 0, 1.0), {"question": "q", "answer": "a"}, rollout_row(0, 1, "high"), [1, 2]],  # type: ignore[list-item]
    )
    path.write_bytes(path.read_bytes() + b"{not json}\n" + b"\n")
    lines, problems = read(path)
    assert lines == [1]
    assert problems.count == 4
    assert problems.shown[0] == (
        f"{path}:2: not a rollout row written by ng_collect_rollouts (no '_ng_task_index' key; its keys: answer, question)"
    )
    assert problems.shown[1].startswith(
        f"{path}:3: not a rollout row written by ng_collect_rollouts (ValueError"
    )
    assert problems.shown[2] == f"{path}:4: a JSON list, not a rollout row"
    assert problems.shown[3].startswith(f"{path}:5: not JSON")


def test_many_problems_are_counted_and_a_few_shown(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"[]\n" * 50)
    _, problems = read(path)
    assert problems.count == 50
    assert len(problems.shown) == 20
    assert problems.summary().endswith("... and 30 more")


def test_a_missing_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"out\.jsonl: no such file") as caught:
        read(tmp_path / "out.jsonl")
    assert caught.value.exit_code == 2
