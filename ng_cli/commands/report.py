"""`ng_report`: write a run's rollouts as one self-contained HTML report (plots, tasks, a chat browser)."""

from __future__ import annotations

from typing import Annotated

import typer

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    composed_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.report import write_report
from ng_cli.report.config import report_config_from

__all__ = ["app", "main", "report"]

_EPILOG = """\b
Config keys this command reads (see docs/report.md):
  input_jsonl_fpath   the output of ng_collect_rollouts (its _failures.jsonl and _metrics.json too)
  output_html_fpath   where the report goes (default: <input stem>_report.html beside the input)
  pass_threshold      reward >= this passes (default: the run's, else reward > 0)
The report needs no server: open it in a browser, or send it to someone.
Exit codes: 0 written, 1 written but some lines could not be read (named), 2 no input / bad options.
Example:
  ng_report +input_jsonl_fpath=results/out.jsonl"""

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def report(
    overrides: Annotated[
        list[str] | None, overrides_argument("Hydra-style overrides: +input_jsonl_fpath=results/out.jsonl")
    ] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Write the HTML report of a rollouts file and print where it is."""
    with composed_config(overrides, config, verbose=verbose) as composed:
        settings = report_config_from(composed)
        result = write_report(
            settings.input_jsonl_fpath, settings.output_html_fpath, pass_threshold=settings.pass_threshold
        )
        make_console(stderr=True).print(result.describe(), highlight=False, markup=False)
    raise typer.Exit(result.exit_code)


def main() -> None:
    """Console-script entry point (`ng_report`)."""
    app()
