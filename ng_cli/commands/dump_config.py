"""`ng_dump_config`: print the composed config as YAML, with secrets masked (and the engine plan on stderr)."""

from __future__ import annotations

import os
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
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.config.render import render_yaml
from ng_cli.launcher.check import check_instances, print_warnings
from ng_cli.launcher.plan import engine_plans
from ng_cli.launcher.render import engine_notes, engines_table
from ng_cli.rollouts.config import STACK_FILE_COMMANDS

__all__ = ["OPTIONS", "DumpConfigOptions", "app", "dump_config", "main"]


class DumpConfigOptions(CommandOptions):
    """ng_dump_config's own key; it also takes every key ng_run, ng_collect_rollouts and
    ng_e2e_collect_rollouts read (it shows the config they would see)."""

    show_sources: bool = False
    """true: same as --sources (a '# from: file:line' comment above each top-level key)."""


OPTIONS = DumpConfigOptions
SHARED = STACK_FILE_COMMANDS

_EPILOG = options_help(
    DumpConfigOptions,
    notes="""It also takes every key of ng_run, ng_collect_rollouts and ng_e2e_collect_rollouts (shown as they
would see it). env.yaml: +dotenv_path=FILE, else the cwd's, else the repo root's.
Merge order: config files < env.yaml < command-line overrides.
Example:
  ng_dump_config "+config_paths=[a.yaml,b.yaml]" ++policy_model_name=m --sources""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def dump_config(
    overrides: Annotated[
        list[str] | None,
        overrides_argument('Hydra-style overrides: "+config_paths=[a.yaml]" key=value ++key=value ~key'),
    ] = None,
    config: ConfigFiles = None,
    sources: Annotated[
        bool, typer.Option("--sources", help="Put '# from: file:line' above each top-level key.")
    ] = False,
    verbose: Verbose = False,
) -> None:
    """Print the composed config (files < env.yaml < overrides), secrets masked."""
    with command_config(
        overrides,
        DumpConfigOptions,
        command="ng_dump_config",
        verbose=verbose,
        config_files=config,
        shared=SHARED,
        shared_on_command_line=True,
    ) as (options, composed):
        print_warnings(check_instances(composed))  # refuse what ng_run would refuse, as it would
        with_sources = sources or options.show_sources
        engines = engine_plans(composed, env=os.environ, python=None)  # refuses an impossible plan
        typer.echo(render_yaml(composed, masked=True, with_sources=with_sources), nl=False)
        if engines:  # on stderr: stdout stays the YAML, for pipes
            console = make_console(stderr=True)
            console.print(engines_table(engines, title="vLLM engines ng_run would start"))
            for note in engine_notes(engines):
                console.print(note)


def main() -> None:
    """Console-script entry point (`ng_dump_config`)."""
    app()
