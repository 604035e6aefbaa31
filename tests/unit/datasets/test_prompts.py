"""`ng_materialize_prompts`: NeMo Gym's prompt templates applied as NeMo Gym applies them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ng_cli.commands.materialize_prompts import app

pytestmark = pytest.mark.usefixtures("empty_env_yaml")


def run(tmp_path: Path, rows: list[dict], prompt: str) -> tuple[int, str, Path]:
    source = tmp_path / "raw.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "prompt.yaml").write_text(prompt)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app,
        [
            f"+input_jsonl_fpath={source}",
            f"+prompt_config={tmp_path / 'prompt.yaml'}",
            f"+output_jsonl_fpath={out}",
        ],
    )
    return result.exit_code, result.output, out


def test_rows_get_their_prompt_as_nemo_gym_writes_it(tmp_path: Path) -> None:
    rows = [
        {"question": "2+2?", "expected_answer": "4", "responses_create_params": {"temperature": 0.5}},
        {"question": "{x}", "expected_answer": "5"},
    ]
    code, output, out = run(tmp_path, rows, "system: Be brief.\nuser: 'Solve: {question} {{literal}}'\n")
    assert code == 0, output
    assert "Materialized 2 rows to" in output
    first, second = (json.loads(line) for line in out.read_text().splitlines())
    assert first == {
        **rows[0],
        "responses_create_params": {
            "temperature": 0.5,
            "input": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Solve: 2+2? {literal}"},
            ],
        },
        "prompt_config_used": str(tmp_path / "prompt.yaml"),
    }
    assert second["responses_create_params"]["input"][1]["content"] == "Solve: {x} {literal}"
    assert out.read_text().splitlines()[0] == json.dumps(first)  # json.dumps' separators, as NeMo Gym


def test_a_row_with_an_input_already_and_a_missing_field_are_refused(tmp_path: Path) -> None:
    rows = [{"q": "a"}, {"q": "b", "responses_create_params": {"input": "hi"}}]
    code, output, out = run(tmp_path, rows, "user: '{q}'\n")
    assert code == 2
    assert "Violating rows: [1]" in output
    assert not out.exists()
    code, output, out = run(tmp_path, [{"q": "a"}], "user: '{question}'\n")
    assert code == 2
    assert "references field 'question'" in output
