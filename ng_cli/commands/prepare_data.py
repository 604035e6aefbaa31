"""`ng_prepare_data`: check every row of the config's datasets, collate each split and measure it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.text import Text

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    make_app,
    make_console,
    overrides_argument,
    reported_errors,
    wants_verbose,
    with_config_files,
)
from ng_cli.config.command_options import CommandOptions, command_options, options_help
from ng_cli.config.nemo_gym_options import not_offered_table
from ng_cli.config.paths import display_path
from ng_cli.config.stand_ins import compose_with_stand_ins
from ng_cli.datasets import prepare_data
from ng_cli.rollouts.config import STACK_FILE_COMMANDS

__all__ = ["OPTIONS", "PrepareDataOptions", "app", "main", "prepare"]

_NO_DOWNLOAD = (
    "downloads missing datasets from GitLab or Hugging Face: network beyond the package registries, "
    "which this project does not use",
    "put each dataset's file at its jsonl_fpath first",
)


class PrepareDataOptions(CommandOptions):
    """NeMo Gym's `TrainDataProcessorConfig`, less its downloads."""

    mode: Literal["train_preparation", "example_validation"]
    """train_preparation (train + validation datasets) or example_validation (example datasets)."""
    output_dirpath: Path
    """Where <split>.jsonl (rows + agent_ref) and <split>_metrics.json go."""

    not_offered = not_offered_table(
        {
            "should_download": _NO_DOWNLOAD,
            "data_source": _NO_DOWNLOAD,
            "overwrite_metrics_conflicts": (
                "merges with metrics recorded in the config; here <split>_metrics.json is written fresh each time",
                "leave it out",
            ),
            "task_data_validation": (
                "checks rows against a server's task_data.py; here every row is checked against its "
                "environment's row_model, always, and any bad row is an error",
                "leave it out",
            ),
        }
    )


OPTIONS = PrepareDataOptions
_EXAMPLE = (
    'ng_prepare_data "+config_paths=[resources_servers/my_env/configs/my_env.yaml]" '
    "+output_dirpath=results/my_env_data +mode=example_validation"
)

_EPILOG = options_help(
    PrepareDataOptions,
    docs="docs/prepare_data.md",
    notes="""The config's agents declare the datasets: (name, type, jsonl_fpath). No model is called: unset
policy_base_url / policy_api_key / policy_model_name are not needed.
A row must be a run request for its agent (responses_create_params a valid Responses body,
agent_ref naming that agent if present) and match its environment's row_model if it has one.
Every bad row is printed as file:line: reason.
Exit codes: 0 written, 2 a bad row (then nothing is written) or a config error.
Example:
  ng_prepare_data "+config_paths=[resources_servers/my_env/configs/my_env.yaml]" \\
      +output_dirpath=results/my_env_data +mode=example_validation""",
)

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
    args = with_config_files(overrides, config)
    with reported_errors(verbose=verbose or wants_verbose(args)):
        composed = compose_with_stand_ins(args).composed  # no model is called: its credentials may be unset
        options = command_options(
            composed,
            PrepareDataOptions,
            command="ng_prepare_data",
            shared=STACK_FILE_COMMANDS,
            asks={
                "mode": ("which datasets? train_preparation or example_validation", _EXAMPLE),
                "output_dirpath": ("where do the collated splits go?", _EXAMPLE),
            },
        )
        reports = prepare_data(
            composed,
            mode=options.mode,
            output_dir=options.output_dirpath,
            on_problem=lambda line: errors.print(Text(line), soft_wrap=True),
        )
    for report in reports:
        total = report.metrics["total"]["examples"]
        typer.echo(
            f"{report.split}: {total} rows -> {display_path(report.output)}, {display_path(report.metrics_file)}"
        )


def main() -> None:
    """Console-script entry point (`ng_prepare_data`)."""
    app()
