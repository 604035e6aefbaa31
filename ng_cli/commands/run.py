"""`ng_run`: start the head server and every server instance of the config, until Ctrl-C."""

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
from ng_cli.config.toplevel import check_top_level_keys
from ng_cli.launcher.supervise import RUN_OPTIONS, launch
from ng_cli.rollouts.config import COLLECT_OPTIONS

__all__ = ["app", "main", "run"]

_EPILOG = """\b
Config keys this command reads:
  config_paths      YAML files to merge, in order (files may list more)
  head_server       {host, port}: where the head server listens (default 127.0.0.1:11000; port 0 = any)
  dry_run           true: print the plan (secrets masked) and exit
  ready_file        write the stack's URLs and pids as JSON there once all are ready
  ready_timeout_s   seconds to wait for every /health (default 60)
  install_requirements  true: pip-install what the servers' requirements.txt name and is not
                    installed yet (into this environment; conflicts are refused by name)
Exit codes: 0 stopped by SIGTERM, 130 stopped by Ctrl-C, 1 a server died or never got ready,
2 config error.
Example:
  ng_run "+config_paths=[resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml]"
"""

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
    with composed_config(overrides, config, verbose=verbose) as composed:
        check_top_level_keys(composed, RUN_OPTIONS, command="ng_run", shared=COLLECT_OPTIONS)
        code = launch(composed, console=make_console())
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point (`ng_run`)."""
    app()
