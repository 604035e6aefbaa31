"""`ng_materialize_prompts` on bad templates and bad rows: a clear error naming the file, never a traceback,
never a NaN written, and the output left as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from ng_cli.commands.materialize_prompts import app

pytestmark = pytest.mark.usefixtures("empty_env_yaml")

GOOD = b'{"q": "2+2?", "n": {"x": 1}}\n'
BEFORE = b"an earlier output\n"


def run(tmp_path: Path, raw: bytes, prompt: bytes) -> tuple[Result, Path, Path]:
    """Run the command; the output file exists beforehand, so a failed run must leave it alone."""
    source = tmp_path / "raw.jsonl"
    if not source.exists():
        source.write_bytes(raw)
    prompt_path = tmp_path / "prompt.yaml"
    prompt_path.write_bytes(prompt)
    out = tmp_path / "out.jsonl"
    out.write_bytes(BEFORE)
    result = CliRunner().invoke(
        app,
        [f"+input_jsonl_fpath={source}", f"+prompt_config={prompt_path}", f"+output_jsonl_fpath={out}"],
    )
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result, source, prompt_path


def left_alone(tmp_path: Path) -> bool:
    """The output is as it was, and no staged file is left beside it."""
    return (tmp_path / "out.jsonl").read_bytes() == BEFORE and sorted(p.name for p in tmp_path.iterdir()) == [
        "env.yaml",
        "out.jsonl",
        "prompt.yaml",
        "raw.jsonl",
    ]


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("'Solve: }'", "Single '}' encountered in format string"),
        ("'Solve: {q'", "expected '}' before end of string"),
        ("'Solve: {0}'", "{0} is a positional field"),
        ("'Solve: {}'", "{} is a positional field"),
        ("'Solve: {q!z}'", "unknown conversion '!z' in {q!z}"),
    ],
)
def test_a_template_that_cannot_be_parsed_names_the_prompt_file_and_the_template(
    tmp_path: Path, template: str, problem: str
) -> None:
    result, _, prompt = run(tmp_path, GOOD, f"system: Be brief.\nuser: {template}\n".encode())
    assert result.exit_code == 2, result.output
    assert f"{prompt}: the user template is not a valid template: {problem}" in result.output
    assert left_alone(tmp_path)


@pytest.mark.parametrize(
    ("template", "good", "bad", "problem"),
    [
        ("'{q.real}'", 5, "a", "AttributeError: 'str' object has no attribute 'real'"),
        ("'{q:>5}'", 5, {"x": 1}, "TypeError: unsupported format string passed to dict.__format__"),
        ("'{q:d}'", 5, "a", "ValueError: Unknown format code 'd' for object of type 'str'"),
        ("'{q[y]}'", {"y": 1}, {"x": 1}, "KeyError: 'y'"),
        ("'{q[9]}'", "1234567890", "", "IndexError: string index out of range"),
    ],
)
def test_a_row_that_cannot_fill_the_template_names_its_line(
    tmp_path: Path, template: str, good: object, bad: object, problem: str
) -> None:
    rows = b"".join(json.dumps({"q": q}).encode() + b"\n" for q in (good, bad))
    result, source, _ = run(tmp_path, rows, f"user: {template}\n".encode())
    assert result.exit_code == 2, result.output
    assert (
        f"{source}:2: the user template cannot be filled from this row ({problem}); nothing was written"
        in (result.output)
    )
    assert left_alone(tmp_path)


def test_a_missing_field_of_the_system_template_names_that_template(tmp_path: Path) -> None:
    result, source, _ = run(tmp_path, GOOD, b"system: 'Level {level}'\nuser: '{q}'\n")
    assert result.exit_code == 2, result.output
    assert f"{source}:1: the system template references field 'level'" in result.output
    assert left_alone(tmp_path)


def test_input_that_is_not_utf8_names_the_line_and_byte(tmp_path: Path) -> None:
    result, source, _ = run(tmp_path, GOOD + b'{"q": "caf\xe9"}\n', b"user: '{q}'\n")
    assert result.exit_code == 2, result.output
    assert f"{source}:2: not UTF-8 text (byte 0xe9 at column 11)" in result.output
    assert left_alone(tmp_path)


def test_a_prompt_file_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    result, _, prompt = run(tmp_path, GOOD, b"system: Be brief.\nuser: 'R\xe9sous {q}'\n")
    assert result.exit_code == 2, result.output
    assert f"{prompt}:2: not UTF-8 text (byte 0xe9 at column 9)" in result.output
    assert left_alone(tmp_path)


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (b'{"q": "a", "score": NaN}', "score is NaN, which is not JSON"),
        (b'{"q": "a", "score": Infinity}', "score is Infinity, which is not JSON"),
        (b'{"q": "a", "score": -Infinity}', "score is -Infinity, which is not JSON"),
        (b'{"q": "a", "score": 1e999}', "score is Infinity, which is not JSON"),
        (
            b'{"q": "a", "responses_create_params": {"tools": [{"w": NaN}]}}',
            "responses_create_params.tools[0].w is NaN",
        ),
        (b'{"q": "\\ud800"}', "q holds a lone surrogate"),
    ],
)
def test_a_row_the_collector_would_refuse_is_refused_with_its_line(
    tmp_path: Path, row: bytes, problem: str
) -> None:
    result, source, _ = run(tmp_path, GOOD + row + b"\n", b"user: '{q}'\n")
    assert result.exit_code == 2, result.output
    assert f"{source}:2: {problem}" in result.output
    assert "the collector would refuse this row, so nothing was written" in result.output
    assert left_alone(tmp_path)


def test_an_input_that_is_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "raw.jsonl")
    result, source, _ = run(tmp_path, b"", b"user: '{q}'\n")
    assert result.exit_code == 2, result.output
    assert f"input_jsonl_fpath: {source} is not a regular file" in result.output
