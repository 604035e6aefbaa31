"""`ng_update_weights`'s numbers are refused as what they are, before any stack is asked (issue 43,
point 9: `+version=1e3` became 1000, and since versions never go down, later steps were refused)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ng_cli.commands.update_weights import app


@pytest.mark.parametrize("version", ["1e3", "true", "2.0", "9223372036854775808", "0"])
def test_a_version_that_is_not_a_64_bit_integer_is_exit_2(version: str) -> None:
    # the head URL answers nothing: an option refused first never reaches it
    done = CliRunner().invoke(
        app, ["+path=/ckpt/step-3", f"+version={version}", "+head_server_url=http://127.0.0.1:9"]
    )
    assert done.exit_code == 2, done.output
    assert "version" in done.output


@pytest.mark.parametrize("value", ["true", "1.5"])
def test_max_staleness_is_an_integer_not_a_boolean(value: str) -> None:
    from ng_cli.commands.collect import app as collect

    done = CliRunner().invoke(
        collect,
        [
            "+agent_name=a",
            "+input_jsonl_fpath=in.jsonl",
            "+output_jsonl_fpath=out.jsonl",
            f"+max_staleness={value}",
        ],
    )
    assert done.exit_code == 2, done.output
    assert "max_staleness" in done.output
