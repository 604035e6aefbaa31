"""`ng_collect_rollouts`: run every input row through an agent, k times, and write scored rollouts."""

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
from ng_cli.config.secrets import Redactor
from ng_cli.report import write_report
from ng_cli.rollouts import CollectConfig, collect_config_from, make_view, render_summary, run_collection

__all__ = ["OPTIONS", "app", "collect", "main"]

OPTIONS = CollectConfig

_EPILOG = options_help(
    CollectConfig,
    docs="docs/collecting.md",
    notes="""Files beside the output: <stem>_failures.jsonl, _metrics.json, _fingerprint.json and NeMo Gym's
_materialized_inputs.jsonl, _aggregate_metrics.json.
Running the same command again resumes: done rollouts are kept, failed ones are retried.
Exit codes: 0 all rollouts scored, 1 some failed (run complete), 2 input/config error.
Example:
  ng_collect_rollouts +agent_name=simple_agent +input_jsonl_fpath=in.jsonl +output_jsonl_fpath=out.jsonl \\
      +num_repeats=4 +num_samples_in_parallel=32 +responses_create_params.temperature=0.7""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def collect(
    overrides: Annotated[
        list[str] | None, overrides_argument("Hydra-style overrides: +agent_name=... +input_jsonl_fpath=...")
    ] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Collect rollouts (resumable), show live progress, and print a summary per agent."""
    console = make_console(stderr=True)
    with composed_config(overrides, config, verbose=verbose) as composed:
        settings = collect_config_from(composed)
        view = make_view(console, interval_s=settings.progress_interval_s)
        result = run_collection(settings, view=view, redactor=Redactor.of(composed.tree))
        console.print(render_summary(result))
        if settings.report:
            console.print(write_report(settings.output_jsonl_fpath).describe(), highlight=False, markup=False)
    raise typer.Exit(result.exit_code)


def main() -> None:
    """Console-script entry point (`ng_collect_rollouts`)."""
    app()
