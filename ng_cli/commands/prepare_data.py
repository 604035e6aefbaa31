"""`ng_prepare_data`: check every row of the config's datasets, collate each split and measure it."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    composed_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.config.paths import display_path
from ng_cli.datasets import prepare_data

__all__ = ["app", "main", "prepare"]

_EPILOG = """\b
Config keys this command reads (see docs/prepare_data.md):
  config_paths     the config whose agents declare datasets: (name, type, jsonl_fpath)
  mode             train_preparation (train + validation datasets) or example_validation (example)
  output_dirpath   where <split>.jsonl (rows + agent_ref) and <split>_metrics.json go
A row must be a run request for its agent (responses_create_params a valid Responses body,
agent_ref naming that agent if present) and match its environment's row_model if it has one.
Every bad row is printed as file:line: reason.
Exit codes: 0 written, 2 a bad row (then nothing is written) or a config error.
Example:
  ng_prepare_data "+config_paths=[resources_servers/my_env/configs/my_env.yaml]" \\
      +output_dirpath=results/my_env_data +mode=example_validation"""

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def prepare(
    overrides: Annotated[
        list[str] | None,
        overrides_argument(
            '"+config_paths=[...]" +output_dirpath=DIR +mode=train_preparation|example_validation'
        ),
    ] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Validate every dataset row (listing all bad ones), then write <split>.jsonl and its metrics."""
    errors = make_console(stderr=True)
    with composed_config(overrides, config, verbose=verbose) as composed:
        reports = prepare_data(composed, on_problem=lambda line: errors.print(Text(line), soft_wrap=True))
    for report in reports:
        total = report.metrics["total"]["examples"]
        typer.echo(
            f"{report.split}: {total} rows -> {display_path(report.output)}, {display_path(report.metrics_file)}"
        )


def main() -> None:
    """Console-script entry point (`ng_prepare_data`)."""
    app()
