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
    path.write_text(json.dumps({"response": {"output": [{"prompt_token_ids": "12"}]}}) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl:1: response.output: an item's prompt_token_ids is str"):
        check_file(path)


def test_ng_check_tokens_exit_codes_and_output(tmp_path: Path) -> None:
    runner = CliRunner()
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
