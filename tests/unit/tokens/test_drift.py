"""The drift check (ng_cli/tokens/drift.py), ng_check_tokens' report, and the collector's count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ng_cli.commands.check_tokens import app
from ng_cli.errors import DataError
from ng_cli.rollouts.results import outcome_of
from ng_cli.tokens.drift import Divergence, check_file, check_response

WIDE: dict[str, str | None] = {"COLUMNS": None}
"""The commands' own width for output that is not a terminal (160), whatever COLUMNS the caller
exported: with COLUMNS=80 their lines wrapped and 14 of these tests failed."""


def call(prompt: list[int], generation: list[int]) -> dict[str, Any]:
    return {
        "type": "message",
        "prompt_token_ids": prompt,
        "generation_token_ids": generation,
        "generation_log_probs": [-0.1] * len(generation),
    }


def response(*calls: dict[str, Any]) -> dict[str, Any]:
    tool_output = {"type": "function_call_output", "call_id": "c", "output": "x"}
    return {"output": [item for c in calls for item in (c, tool_output)]}


CONTIGUOUS = response(
    call([1, 2], [3, 4, 9]), call([1, 2, 3, 4, 9, 5], [6, 9]), call([1, 2, 3, 4, 9, 5, 6, 9, 7], [8])
)
DRIFTED = response(call([1, 2], [3, 4, 9]), call([1, 2, 34, 9, 5], [6]))


def test_contiguous_turns_do_not_drift() -> None:
    tokens = check_response(CONTIGUOUS)
    assert tokens is not None
    assert tokens.turns == 3
    assert not tokens.is_drifted


def test_first_divergence_is_turn_position_and_both_ids() -> None:
    tokens = check_response(DRIFTED)
    assert tokens is not None
    assert tokens.divergence == Divergence(turn=2, position=2, expected=3, found=34)


def test_a_prompt_shorter_than_the_history_drifts() -> None:
    tokens = check_response(response(call([1, 2], [3]), call([1, 2], [4])))
    assert tokens is not None
    assert tokens.divergence == Divergence(turn=2, position=2, expected=3, found=None)


def test_rollouts_without_token_ids_are_not_checked() -> None:
    assert check_response({"output": [{"type": "message", "content": []}]}) is None
    assert check_response(None) is None


def write_rows(path: Path, responses: list[dict[str, Any]]) -> Path:
    rows = [
        {"_ng_task_index": i, "_ng_rollout_index": 0, "reward": 1.0, "response": r}
        for i, r in enumerate(responses)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_check_file_reports_per_rollout_and_in_total(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "rollouts.jsonl", [CONTIGUOUS, DRIFTED, {"output": []}])
    report = check_file(path, token_text=lambda token: f"t{token}")
    assert report.lines == [
        "line 1 (task 0, rollout 0): ok (3 turns)",
        "line 2 (task 1, rollout 0): DRIFT turn 2's prompt diverges at position 2: 't34' (id 34) where turn 1 had 't3' (id 3)",
        "line 3 (task 2, rollout 0): no token ids",
    ]
    assert (report.rollouts, report.with_token_ids, report.drifted, report.exit_code) == (3, 2, 1, 1)
    assert report.summary().endswith("1 of 2 rollouts with token ids drifted (1 without token ids)")


def test_a_bad_line_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"response": CONTIGUOUS}) + "\n{not json\n")
    with pytest.raises(DataError, match=r"bad.jsonl:2: not a JSON line"):
        list(check_file(path).lines)


NOT_AN_ID = "not a token id (an integer from 0 to 2147483647)"


@pytest.mark.parametrize(
    ("bad_call", "problem"),
    [
        ({"prompt_token_ids": "12"}, "prompt_token_ids is str, not a list of token ids"),
        (call([1, 2, 3, "x"], [4]), f"prompt_token_ids[3] is 'x', {NOT_AN_ID}"),
        (call([1, 2, 3, 4], [10**30]), f"generation_token_ids[0] is 1e+30, {NOT_AN_ID}"),  # orjson: a float
        (call([1, 2, 3, 4], [2**40]), f"generation_token_ids[0] is 1099511627776, {NOT_AN_ID}"),
        (call([1, 2, 3, -1], [4]), f"prompt_token_ids[3] is -1, {NOT_AN_ID}"),
        (call([1, 2, 3, True], [4]), f"prompt_token_ids[3] is True, {NOT_AN_ID}"),
    ],
    ids=["not-a-list", "string", "huge-float", "huge-int", "negative", "bool"],
)
@pytest.mark.parametrize("with_tokenizer", [False, True], ids=["ids", "tokenizer"])
def test_ng_check_tokens_names_each_row_with_bad_ids_and_exits_2(
    tmp_path: Path, tiny_tokenizer_dir: Path, bad_call: dict[str, Any], problem: str, with_tokenizer: bool
) -> None:
    bad = response(call([1, 2], [3]), bad_call)
    path = write_rows(tmp_path / "rows.jsonl", [CONTIGUOUS, bad, DRIFTED, bad])
    extra = [f"+tokenizer_path={tiny_tokenizer_dir}"] if with_tokenizer else []
    result = CliRunner(env=WIDE).invoke(app, [f"+input_jsonl_fpath={path}", *extra])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.output.splitlines()
    assert lines[0] == "line 1 (task 0, rollout 0): ok (3 turns)"
    assert lines[1] == f"line 2 (task 1, rollout 0): INVALID response.output[2].{problem}"
    assert lines[2].startswith("line 3 (task 2, rollout 0): DRIFT")  # rows after a bad one are checked
    assert lines[3] == f"line 4 (task 3, rollout 0): INVALID response.output[2].{problem}"
    assert "1 of 2 rollouts with token ids drifted; 2 rollouts with invalid token ids" in result.output


def test_a_drifted_rollout_whose_ids_are_outside_the_vocabulary_is_shown(
    tmp_path: Path, tiny_tokenizer_dir: Path
) -> None:
    path = write_rows(tmp_path / "rows.jsonl", [response(call([1, 2], [3]), call([1, 2, 2**31 - 1], [4]))])
    result = CliRunner(env=WIDE).invoke(
        app, [f"+input_jsonl_fpath={path}", f"+tokenizer_path={tiny_tokenizer_dir}"]
    )
    assert result.exit_code == 1, result.output
    assert "'<not in the vocabulary>' (id 2147483647)" in result.output


def test_ng_check_tokens_exit_codes_and_output(tmp_path: Path) -> None:
    runner = CliRunner(env=WIDE)
    clean = write_rows(tmp_path / "clean.jsonl", [CONTIGUOUS])
    result = runner.invoke(app, [f"+input_jsonl_fpath={clean}"])
    assert result.exit_code == 0, result.output
    assert "0 of 1 rollouts with token ids drifted" in result.output
    drifted = write_rows(tmp_path / "drifted.jsonl", [DRIFTED])
    result = runner.invoke(app, [f"+input_jsonl_fpath={drifted}"])
    assert result.exit_code == 1
    assert "DRIFT turn 2's prompt diverges at position 2: id 34 where turn 1 had id 3" in result.output
    result = runner.invoke(app, [f"+input_jsonl_fpath={tmp_path / 'missing.jsonl'}"])
    assert result.exit_code == 2
    assert "missing.jsonl: cannot be read" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, [f"+input_jsonl_path={clean}"])
    assert result.exit_code == 2
    assert "did you mean +input_jsonl_fpath" in result.output


def test_the_collector_counts_drift_per_rollout() -> None:
    row = {"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}
    assert outcome_of({**row, "response": CONTIGUOUS}).token_drift is False
    assert outcome_of({**row, "response": DRIFTED}).token_drift is True
    assert outcome_of({**row, "response": {"output": []}}).token_drift is None
