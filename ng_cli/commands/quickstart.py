"""`ng_quickstart`: serve the embedded tiny model on CPU vLLM, start the example stack, collect scored rollouts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from pydantic import Field

from ng_cli.commands._app import (
    Verbose,
    _quoted,
    command_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.quickstart import QuickstartPlan, run_quickstart

__all__ = ["OPTIONS", "QuickstartOptions", "app", "main", "quickstart"]

SETUP_SECONDS_ENV = "NG_QUICKSTART_SETUP_S"
"""Set by scripts/quickstart.sh to the seconds its install steps took (shown in the timings)."""

app = make_app(help=__doc__)


class QuickstartOptions(CommandOptions):
    """How many rollouts, how long each answer may be, and where the results and logs go."""

    num_repeats: int = Field(default=2, ge=1)
    """Rollouts per example row."""
    max_output_tokens: int = Field(default=256, ge=1)
    """Cap per model call."""
    output: Path | None = None
    """The rollouts file (default: results/example_rollouts.jsonl)."""
    run_dir: Path | None = None
    """Where the logs go (default: results/quickstart/)."""


OPTIONS = QuickstartOptions
_FLAG_HELP = "Same as +{key}=..."


@app.command(
    epilog=options_help(
        QuickstartOptions,
        docs="docs/quickstart.md",
        notes="Each key is also a flag (--num-repeats, --max-output-tokens, --output, --run-dir).\n"
        "Exit codes: the collector's (0 all scored, 1 some failed), 2 bad options, 1 a server died.",
    )
)
def quickstart(
    overrides: Annotated[
        list[str] | None, overrides_argument("+num_repeats=2 +max_output_tokens=256")
    ] = None,
    num_repeats: Annotated[int | None, typer.Option(help=_FLAG_HELP.format(key="num_repeats"))] = None,
    max_output_tokens: Annotated[
        int | None, typer.Option(help=_FLAG_HELP.format(key="max_output_tokens"))
    ] = None,
    output: Annotated[Path | None, typer.Option(help=_FLAG_HELP.format(key="output"))] = None,
    run_dir: Annotated[Path | None, typer.Option(help=_FLAG_HELP.format(key="run_dir"))] = None,
    verbose: Verbose = False,
) -> None:
    """Run the whole chain once, stop everything, and print the timings and what the rollouts show."""
    flags = {
        "num_repeats": num_repeats,
        "max_output_tokens": max_output_tokens,
        "output": output,
        "run_dir": run_dir,
    }
    args = [
        *(overrides or []),
        *(f"++{key}={_quoted(str(value))}" for key, value in flags.items() if value is not None),
    ]
    setup = os.environ.get(SETUP_SECONDS_ENV)
    with command_config(args, QuickstartOptions, command="ng_quickstart", verbose=verbose) as (options, _):
        plan = QuickstartPlan.default().with_changes(
            num_repeats=options.num_repeats,
            max_output_tokens=options.max_output_tokens,
            output=options.output,
            run_dir=options.run_dir,
        )
        code = run_quickstart(plan, console=make_console(), setup_s=float(setup) if setup else None)
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point (`ng_quickstart`)."""
    app()


if __name__ == "__main__":
    main()
