"""The validation pass names every bad line; the work pass streams rows with overrides merged."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import orjson
import pytest

from ng_cli.errors import DataError
from ng_cli.rollouts.inputs import iter_tasks, merge_params, row_agent, scan_input

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rollouts" / "inputs"


def write_rows(path: Path, rows: list[object], *, blank_after: int | None = None) -> Path:
    lines = [orjson.dumps(row) for row in rows]
    if blank_after is not None:
        lines.insert(blank_after, b"   ")
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_every_bad_line_is_reported_with_its_line_number() -> None:
    path = FIXTURES / "bad_rows.jsonl"
    expected = orjson.loads((FIXTURES / "bad_rows.expected.json").read_bytes())
    with pytest.raises(DataError) as caught:
        scan_input(path, limit=None, agent_name=None)
    message = caught.value.message
    assert f"{len(expected)} bad input problems; nothing was run" in message
    reported = dict(re.findall(rf"{re.escape(str(path))}:(\d+): (.*)", message))
    assert set(reported) == set(expected)
    for line, fragment in expected.items():
        assert fragment in reported[line], (line, reported[line])
    assert caught.value.hint is not None
    assert "+limit" in caught.value.hint


def test_agent_name_replaces_row_agents(tmp_path: Path) -> None:
    path = write_rows(
        tmp_path / "in.jsonl", [{"responses_create_params": {}}, {"responses_create_params": {}}]
    )
    summary = scan_input(path, limit=None, agent_name="solo")
    assert summary.agents == ["solo"]
    assert [summary.agent_of(i) for i in range(summary.num_tasks)] == ["solo", "solo"]


def test_summary_counts_tasks_and_hashes_the_whole_file(tmp_path: Path) -> None:
    rows = [{"responses_create_params": {"input": str(i)}, "agent_ref": "ab"[i % 2]} for i in range(7)]
    path = write_rows(tmp_path / "in.jsonl", rows, blank_after=3)
    summary = scan_input(path, limit=None, agent_name=None)
    assert summary.num_tasks == 7
    assert summary.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert summary.size_bytes == path.stat().st_size
    assert summary.agents == ["a", "b"]
    assert summary.first_line_of_agent == {"a": 1, "b": 2}
    assert [summary.agent_of(i) for i in range(7)] == [row["agent_ref"] for row in rows]


def test_limit_stops_validation_but_not_hashing(tmp_path: Path) -> None:
    rows: list[object] = [{"responses_create_params": {}, "agent_ref": "a"}] * 3 + ["garbage after the limit"]
    path = write_rows(tmp_path / "in.jsonl", rows)
    summary = scan_input(path, limit=3, agent_name=None)
    assert summary.num_tasks == 3
    assert summary.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_missing_and_empty_files_are_data_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="input file not found"):
        scan_input(tmp_path / "nope.jsonl", limit=None, agent_name="a")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match="no rows to run"):
        scan_input(empty, limit=None, agent_name="a")


def test_problem_list_is_capped_but_counted(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("not json\n" * 50)
    with pytest.raises(DataError) as caught:
        scan_input(path, limit=None, agent_name="a")
    assert "50 bad input problems" in caught.value.message
    assert "... and 30 more" in caught.value.message


def test_iter_tasks_streams_rows_with_overrides_and_line_numbers(tmp_path: Path) -> None:
    rows = [
        {
            "responses_create_params": {"input": "x", "temperature": 1.0, "reasoning": {"effort": "low"}},
            "k": 1,
        },
        {"responses_create_params": {"input": "y"}, "agent_ref": "b"},
    ]
    path = write_rows(tmp_path / "in.jsonl", rows, blank_after=1)
    summary = scan_input(path, limit=None, agent_name="a")
    overrides = {"temperature": 0.7, "reasoning": {"summary": "auto"}}
    tasks = list(iter_tasks(summary, params_overrides=overrides))
    assert [(t.index, t.line, t.agent) for t in tasks] == [(0, 1, "a"), (1, 3, "a")]
    assert tasks[0].row["responses_create_params"] == {
        "input": "x",
        "temperature": 0.7,
        "reasoning": {"effort": "low", "summary": "auto"},
    }
    assert tasks[0].row["k"] == 1
    assert tasks[0].row["agent_ref"] == {"type": "responses_api_agents", "name": "a"}
    # +agent_name wins over the row's own agent_ref, and the output must say which agent ran it.
    assert tasks[1].row["agent_ref"] == {"type": "responses_api_agents", "name": "a"}


def test_iter_tasks_keeps_a_matching_plain_agent_ref(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "in.jsonl", [{"responses_create_params": {}, "agent_ref": "a"}])
    summary = scan_input(path, limit=None, agent_name=None)
    (task,) = iter_tasks(summary, params_overrides={})
    assert task.row["agent_ref"] == "a"


def test_iter_tasks_respects_limit(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "in.jsonl", [{"responses_create_params": {}, "i": i} for i in range(10)])
    summary = scan_input(path, limit=4, agent_name="a")
    assert [t.row["i"] for t in iter_tasks(summary, params_overrides={})] == [0, 1, 2, 3]


def rows_file(path: Path, count: int) -> Path:
    return write_rows(path, [{"responses_create_params": {}, "i": i} for i in range(count)])


def truncate_to(path: Path, lines: int) -> None:
    """Cut the file in place (same inode) to its first `lines` lines."""
    os.truncate(path, len(b"".join(path.read_bytes().splitlines(keepends=True)[:lines])))


def test_iter_tasks_refuses_a_file_truncated_after_it_was_checked(tmp_path: Path) -> None:
    summary = scan_input(rows_file(tmp_path / "in.jsonl", 20), limit=None, agent_name="a")
    truncate_to(summary.path, 5)

    with pytest.raises(DataError) as caught:
        next(iter_tasks(summary, params_overrides={}))

    message = caught.value.message
    assert str(summary.path) in message
    assert "had 20 rows to run" in message
    assert "now has 5 rows" in message
    assert "after reading 0 of them" in message


def test_iter_tasks_stops_when_the_file_shrinks_while_it_is_read(tmp_path: Path) -> None:
    summary = scan_input(rows_file(tmp_path / "in.jsonl", 20), limit=None, agent_name="a")
    tasks = iter_tasks(summary, params_overrides={})
    first = [next(tasks) for _ in range(3)]
    truncate_to(summary.path, 10)

    with pytest.raises(DataError) as caught:
        list(tasks)

    assert [task.row["i"] for task in first] == [0, 1, 2]
    assert "now has 10 rows" in caught.value.message
    assert "after reading 3 of them" in caught.value.message


def test_iter_tasks_refuses_a_file_replaced_before_the_work_pass(tmp_path: Path) -> None:
    summary = scan_input(rows_file(tmp_path / "in.jsonl", 4), limit=None, agent_name="a")
    rows_file(tmp_path / "new.jsonl", 4).replace(summary.path)  # same rows, another file

    with pytest.raises(DataError, match="changed during the collection"):
        list(iter_tasks(summary, params_overrides={}))


def test_iter_tasks_reads_on_from_the_checked_file_when_it_is_renamed_over(tmp_path: Path) -> None:
    summary = scan_input(rows_file(tmp_path / "in.jsonl", 4), limit=None, agent_name="a")
    tasks = iter_tasks(summary, params_overrides={})
    first = next(tasks)
    rows_file(tmp_path / "new.jsonl", 1).replace(summary.path)

    assert [first.row["i"], *(task.row["i"] for task in tasks)] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("ref", "name"),
    [("plain", "plain"), ({"name": "n"}, "n"), ({"type": "responses_api_agents", "name": "t"}, "t")],
)
def test_row_agent_accepts_both_reference_forms(ref: object, name: str) -> None:
    assert row_agent({"agent_ref": ref}) == name


@pytest.mark.parametrize("ref", [None, "", {"name": ""}, {"type": "x", "name": "n"}, 42])
def test_row_agent_rejects_bad_references(ref: object) -> None:
    with pytest.raises(ValueError, match="agent_ref"):
        row_agent({"agent_ref": ref} if ref is not None else {})


def test_merge_params_does_not_mutate_its_inputs() -> None:
    params = {"a": {"b": 1}}
    overrides = {"a": {"c": 2}}
    assert merge_params(params, overrides) == {"a": {"b": 1, "c": 2}}
    assert params == {"a": {"b": 1}}
    assert overrides == {"a": {"c": 2}}


def test_with_seed_puts_the_seed_where_nemo_gym_does_and_leaves_the_row_alone() -> None:
    """NeMo Gym 0.7.0 (`RolloutCollectionHelper._preprocess_raw_rows`) writes the seed into
    `responses_create_params.metadata.extra_body`, a JSON string, keeping what is there."""
    from ng_cli.rollouts.inputs import with_seed

    row = {
        "responses_create_params": {
            "input": "q",
            "seed": 99,
            "metadata": {"extra_body": '{"top_k": 5}', "a": "b"},
        },
        "x": 1,
    }
    assert with_seed(row, 3) == {
        "responses_create_params": {
            "input": "q",
            "seed": 99,
            "metadata": {"extra_body": '{"top_k": 5, "seed": 3}', "a": "b"},
        },
        "x": 1,
    }
    assert row["responses_create_params"]["metadata"]["extra_body"] == '{"top_k": 5}'
    assert with_seed({"responses_create_params": {"input": "q"}}, 0)["responses_create_params"] == {
        "input": "q",
        "metadata": {"extra_body": '{"seed": 0}'},
    }


def test_agent_map_reroutes_by_the_rows_agent_then_its_default(tmp_path: Path) -> None:
    """NeMo Gym 0.7.0's precedence: agent_map[<row agent_ref.name>] > agent_map._default > agent_ref."""
    rows = [
        {"responses_create_params": {}, "agent_ref": {"name": "old"}},
        {"responses_create_params": {}, "agent_ref": {"name": "kept"}},
        {"responses_create_params": {}},
    ]
    path = write_rows(tmp_path / "in.jsonl", rows)
    summary = scan_input(path, limit=None, agent_name=None, agent_map={"old": "new", "_default": "fallback"})
    assert [summary.agent_of(i) for i in range(3)] == ["new", "fallback", "fallback"]
    summary = scan_input(path, limit=None, agent_name="solo", agent_map={"old": "new"})
    assert [summary.agent_of(i) for i in range(3)] == ["new", "solo", "solo"]
    with pytest.raises(DataError, match="no 'agent_ref'"):
        scan_input(path, limit=None, agent_name=None, agent_map={"old": "new"})
