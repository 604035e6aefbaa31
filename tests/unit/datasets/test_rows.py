"""One dataset row against its agent and its environment's row model."""

from __future__ import annotations

import orjson
import pytest
from pydantic import BaseModel

from ng_cli.datasets.rows import check_row, with_agent_ref


class Row(BaseModel):
    expected_answer: int


def raw(row: object) -> bytes:
    return orjson.dumps(row)


GOOD = {"responses_create_params": {"input": "What is 1 + 1?"}, "expected_answer": 2}


def test_a_good_row_comes_back_parsed() -> None:
    assert check_row(raw(GOOD), agent="a", row_model=Row) == GOOD


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (raw([1, 2]), "expected a JSON object, got list"),
        (raw({"expected_answer": 2}), "'responses_create_params' must be an object, it is missing"),
        (raw({"responses_create_params": "hi", "expected_answer": 2}), "it is a str"),
        (
            raw({"responses_create_params": {"tools": []}, "expected_answer": 2}),
            "responses_create_params.input: missing",
        ),
        (raw({**GOOD, "agent_ref": {"type": "responses_api_agents", "name": "b"}}), "agent_ref names 'b'"),
        (raw({**GOOD, "agent_ref": 3}), "agent_ref must be"),
        (raw({"responses_create_params": {"input": "q"}}), "expected_answer: missing (Row)"),
        (
            raw({"responses_create_params": {"input": "q"}, "expected_answer": "two"}),
            "expected_answer: Input should be a valid integer",
        ),
    ],
)
def test_a_bad_row_is_one_reason(row: bytes, reason: str) -> None:
    checked = check_row(row, agent="a", row_model=Row)
    assert isinstance(checked, str)
    assert reason in checked


def test_several_problems_are_all_named() -> None:
    checked = check_row(
        raw({"responses_create_params": {"tools": []}, "agent_ref": "x"}), agent="a", row_model=Row
    )
    assert isinstance(checked, str)
    assert "input: missing" in checked
    assert "agent_ref names 'x'" in checked
    assert "expected_answer" in checked


def test_without_a_row_model_only_the_run_request_is_checked() -> None:
    assert check_row(raw({"responses_create_params": {"input": "q"}}), agent="a", row_model=None) == {
        "responses_create_params": {"input": "q"}
    }


def test_agent_ref_is_set_to_the_dataset_agent() -> None:
    assert with_agent_ref({"x": 1, "agent_ref": "a"}, "a") == {
        "x": 1,
        "agent_ref": {"type": "responses_api_agents", "name": "a"},
    }
