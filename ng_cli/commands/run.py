"""`ng_run`: start the head server and every server instance of the config, until Ctrl-C."""

from __future__ import annotations

from typing import Annotated

import typer

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    command_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.config.command_options import options_help
from ng_cli.config.run_options import RunOptions
from ng_cli.launcher.supervise import launch
from ng_cli.rollouts.config import STACK_FILE_COMMANDS

__all__ = ["OPTIONS", "SHARED", "app", "main", "run"]

OPTIONS = RunOptions
SHARED = STACK_FILE_COMMANDS
"""Commands whose keys may sit in the config files ng_run reads (a file sets them, not ng_run's line)."""

_EPILOG = options_help(
    RunOptions,
    docs="docs/running.md",
    notes="""Every other top-level key is a server instance, or a value set in env.yaml / read by a ${...}.
Exit codes: 0 stopped by SIGTERM, 130 stopped by Ctrl-C, 1 a server died or never got ready,
2 config error.
Example:
  ng_run "+config_paths=[resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml]"
""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def run(
    overrides: Annotated[
        list[str] | None, overrides_argument('Hydra-style overrides: "+config_paths=[a.yaml]" ++key=value')
    ] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Start the stack, print where each server listens, and supervise it until a signal."""
    with command_config(
        overrides, RunOptions, command="ng_run", verbose=verbose, config_files=config, shared=SHARED
    ) as (options, composed):
        code = launch(composed, console=make_console(), options=options)
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point (`ng_run`)."""
    app()
