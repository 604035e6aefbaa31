"""`ng_e2e_collect_rollouts`: start the config's stack, collect one split of its datasets, stop it."""

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
from ng_cli.e2e import collect_end_to_end
from ng_cli.rollouts.config import STACK_FILE_COMMANDS, E2EOptions

__all__ = ["OPTIONS", "app", "e2e_collect", "main"]

_EXAMPLE = (
    'ng_e2e_collect_rollouts "+config_paths=[...]" +split=example +output_jsonl_fpath=results/out.jsonl'
)

OPTIONS = E2EOptions

_EPILOG = options_help(
    E2EOptions,
    docs="docs/e2e_collect_rollouts.md",
    notes="""The stack is the config's (config_paths), as for ng_run. <output stem>_inputs/<split>.jsonl (the
collated input), <stem>_servers.log and the collector's files go beside the output.
Running the same command again resumes. Ctrl-C stops everything and keeps what is finished.
Exit codes: the collector's (0 all scored, 1 some failed), 2 bad data or config, 1 a server
died or never got ready, 130 Ctrl-C, 143 SIGTERM.
Example:
  ng_e2e_collect_rollouts "+config_paths=[resources_servers/my_env/configs/my_env.yaml,\\
responses_api_models/vllm_model/configs/vllm_model.yaml]" +split=example +output_jsonl_fpath=results/my_env.jsonl""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def e2e_collect(
    overrides: Annotated[
        list[str] | None,
        overrides_argument('"+config_paths=[...]" +split=example +output_jsonl_fpath=out.jsonl'),
    ] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Collate the split, start the stack, collect every row (resumable), stop the stack."""
    with command_config(
        overrides,
        E2EOptions,
        command="ng_e2e_collect_rollouts",
        verbose=verbose,
        config_files=config,
        asks={
            "split": ("which datasets? example, validation or train", _EXAMPLE),
            "output_jsonl_fpath": ("where do the rollouts go?", _EXAMPLE),
        },
        shared=STACK_FILE_COMMANDS,
    ) as (options, composed):
        code = collect_end_to_end(composed, options, console=make_console(stderr=True))
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point (`ng_e2e_collect_rollouts`)."""
    app()
