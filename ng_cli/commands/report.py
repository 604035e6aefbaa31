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
from ng_cli.config.command_options import options_help
from ng_cli.report import write_report
from ng_cli.report.config import ReportConfig, report_config_from

__all__ = ["OPTIONS", "app", "main", "report"]

OPTIONS = ReportConfig

_EPILOG = options_help(
    ReportConfig,
    docs="docs/report.md",
    notes="""The report needs no server: open it in a browser, or send it to someone.
Exit codes: 0 written, 1 written but some lines could not be read (named), 2 no input / bad options.
Example:
  ng_report +input_jsonl_fpath=results/out.jsonl""",
)

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
