"""`ng_collect_rollouts` plumbing: exit code 2 and a line-numbered message for bad input or config.

Behaviour is tested on the library; these only check what reaches the user and the exit code.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ng_cli.commands.collect import app
from tests.fixtures.commands import invoke_app

pytestmark = pytest.mark.usefixtures("empty_workdir")


def test_bad_input_exits_2_naming_the_line_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"responses_create_params": {}}\n{"oops"\n')
    code, output = invoke_app(
        app,
        "+agent_name=a",
        "+agent_urls.a=http://127.0.0.1:9",  # nothing listens there: no request may be sent
        "+input_jsonl_fpath=in.jsonl",
        "+output_jsonl_fpath=out.jsonl",
    )
    assert code == 2
    assert "in.jsonl:2: not valid JSON" in output
    assert not (tmp_path / "out.jsonl").exists()


def test_config_error_exits_2() -> None:
    code, output = invoke_app(
        app, "+input_jsonl_fpath=in.jsonl", "+output_jsonl_fpath=out.jsonl", "+num_repeats=0"
    )
    assert code == 2
    assert "num_repeats" in output


def test_help_lists_the_options() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for key in ("num_samples_in_parallel", "rollout_timeout_s", "agent_urls", "overwrite", "Exit codes"):
        assert key in result.output
