"""`ng_init_resources_server`: write a new environment from a template that works as written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ng_cli.commands._app import Verbose, make_app, make_console, reported_errors, wants_verbose
from ng_cli.config.compose import compose_config
from ng_cli.scaffold import init_resources_server

__all__ = ["app", "init", "main"]

_EPILOG = """\b
Config keys this command reads:
  entrypoint   resources_servers/<name>: the folder to create, under the current directory
               (name: lower_snake_case)
Writes app.py (an add tool and a verifier), configs/<name>.yaml (the server and a
<name>_simple_agent with train, validation and example datasets), data/example.jsonl (5 rows),
tests/test_app.py and README.md. An existing folder is never touched.
Exit codes: 0 written, 2 bad name or the folder exists (nothing written).
Example:
  ng_init_resources_server +entrypoint=resources_servers/my_env"""

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def init(
    overrides: Annotated[
        list[str] | None, typer.Argument(help="+entrypoint=resources_servers/<name>")
    ] = None,
    verbose: Verbose = False,
) -> None:
    """Create resources_servers/<name>/ (in the current directory) with a tool, a verifier, a config,
    data, tests and a README."""
    with reported_errors(verbose=verbose or wants_verbose(overrides)):
        entrypoint = compose_config(list(overrides or [])).get("entrypoint")
        # NeMo Gym writes `Path(entrypoint).resolve()`: relative to the working directory.
        cwd = Path.cwd()
        created = init_resources_server(entrypoint, root=cwd)
    shown = created.folder.relative_to(cwd).as_posix()
    console = make_console()
    console.print(f"wrote {shown}/ in {cwd}:", highlight=False)
    for path in created.files:
        console.print(f"  {path.relative_to(created.folder).as_posix()}", highlight=False)
    console.print(f"next: ng_test +entrypoint={shown}", highlight=False)


def main() -> None:
    """Console-script entry point (`ng_init_resources_server`)."""
    app()
