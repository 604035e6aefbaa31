"""`ng_init_resources_server`: write a new environment from a template that works as written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from ng_cli.commands._app import Verbose, command_config, make_app, make_console, overrides_argument
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.config.nemo_gym_options import not_offered_table
from ng_cli.scaffold import init_resources_server

__all__ = ["OPTIONS", "InitOptions", "app", "init", "main"]

_NEW_SCAFFOLD = (
    "belongs to NeMo Gym's manifest-backed `gym env init` scaffold; here one template is written",
    "ng_init_resources_server +entrypoint=resources_servers/<name>",
)


class InitOptions(CommandOptions):
    """Which environment to create (NeMo Gym's `ng_init_resources_server` form)."""

    entrypoint: str
    """resources_servers/<name>: the folder to create, under the current directory (name: lower_snake_case)."""

    not_offered = not_offered_table(
        {
            key: _NEW_SCAFFOLD
            for key in (
                "scaffold_kind",
                "scaffold_name",
                "profile",
                "reuse_verifier",
                "reward_range",
                "higher_is_better",
            )
        }
    )


OPTIONS = InitOptions
_EXAMPLE = "ng_init_resources_server +entrypoint=resources_servers/my_env"

_EPILOG = options_help(
    InitOptions,
    docs="docs/init_resources_server.md",
    notes=f"""Writes app.py (an add tool and a verifier), configs/<name>.yaml (the server and a
<name>_simple_agent with train, validation and example datasets), data/example.jsonl (5 rows),
tests/test_app.py and README.md. An existing folder is never touched.
Exit codes: 0 written, 2 bad name or the folder exists (nothing written).
Example:
  {_EXAMPLE}""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def init(
    overrides: Annotated[list[str] | None, overrides_argument("+entrypoint=resources_servers/<name>")] = None,
    verbose: Verbose = False,
) -> None:
    """Create resources_servers/<name>/ (in the current directory) with a tool, a verifier, a config,
    data, tests and a README."""
    with command_config(
        overrides,
        InitOptions,
        command="ng_init_resources_server",
        verbose=verbose,
        asks={"entrypoint": ("which environment? resources_servers/<name>", _EXAMPLE)},
    ) as (options, _):
        # NeMo Gym writes `Path(entrypoint).resolve()`: relative to the working directory.
        cwd = Path.cwd()
        created = init_resources_server(options.entrypoint, root=cwd)
    shown = created.folder.relative_to(cwd).as_posix()
    console = make_console()
    console.print(f"wrote {shown}/ in {cwd}:", highlight=False)
    for path in created.files:
        console.print(f"  {path.relative_to(created.folder).as_posix()}", highlight=False)
    console.print(f"next: ng_test +entrypoint={shown}", highlight=False)


def main() -> None:
    """Console-script entry point (`ng_init_resources_server`)."""
    app()
