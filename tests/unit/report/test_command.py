"""`ng_report` plumbing: where the report went, the exit code, and messages naming the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ng_cli.commands.report import app
from tests.fixtures.commands import invoke_app
from tests.fixtures.rollouts.rollout_rows import rollout_row, write_jsonl

pytestmark = pytest.mark.usefixtures("empty_workdir")


def test_writes_the_report_and_names_it(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "out.jsonl", [rollout_row(0, 0, 1.0)])
    code, output = invoke_app(app, "+input_jsonl_fpath=out.jsonl", "+output_html_fpath=reports/run.html")
    assert code == 0, output
    assert "report: reports/run.html  (1 rollouts, 0 failed;" in output
    assert (tmp_path / "reports" / "run.html").stat().st_size > 0


def test_a_torn_line_still_writes_the_report_and_exits_1(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "out.jsonl", [rollout_row(0, 0, 1.0)], tail=b'{"tor')
    code, output = invoke_app(app, "+input_jsonl_fpath=out.jsonl")
    assert code == 1
    assert "out.jsonl:2: torn last line" in output
    assert (tmp_path / "out_report.html").exists()


def test_a_missing_file_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    code, output = invoke_app(app, "+input_jsonl_fpath=nope.jsonl")
    assert code == 2
    assert "nope.jsonl: no such file" in output
    assert not (tmp_path / "nope_report.html").exists()


def test_missing_or_bad_options_exit_2_naming_the_key() -> None:
    code, output = invoke_app(
        app,
    )
    assert code == 2
    assert "input_jsonl_fpath: which rollouts file to report on?" in output
    assert "hint: ng_report +input_jsonl_fpath=" in output
    code, output = invoke_app(app, "+input_jsonl_fpath=out.jsonl", "+pass_threshold=high")
    assert code == 2
    assert "pass_threshold" in output


def test_a_misspelt_option_is_an_error_not_ignored(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "out.jsonl", [rollout_row(0, 0, 1.0)])
    code, output = invoke_app(app, "+input_jsonl_fpath=out.jsonl", "+output_html_path=x.html")
    assert code == 2
    assert "output_html_path: unknown option of ng_report (did you mean +output_html_fpath?)" in output
    assert not (tmp_path / "out_report.html").exists()


def test_help_lists_the_options() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for key in ("input_jsonl_fpath", "output_html_fpath", "pass_threshold", "Exit codes"):
        assert key in result.output
