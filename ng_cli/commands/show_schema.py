"""`ng show_schema` (NeMo Gym's `gym env schema`): a resources server's task-data schema as JSON Schema."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ng_cli.commands._app import Verbose, make_app, overrides_argument, read_options, reported_errors
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.datasets.discovery import search_roots
from ng_cli.datasets.task_data import server_folder, task_data_schema
from ng_cli.errors import NgError

__all__ = ["OPTIONS", "ShowSchemaOptions", "app", "main", "show_schema"]


class ShowSchemaOptions(CommandOptions):
    """Which server."""

    entrypoint: str
    """The server's folder, `resources_servers/<name>` (NeMo Gym's --resources-server NAME)."""


OPTIONS = ShowSchemaOptions

app = make_app(help=__doc__)


@app.command(
    epilog=options_help(
        ShowSchemaOptions,
        docs="docs/umbrella.md",
        notes="""Prints the JSON Schema of the `TaskData` its task_data.py exports (NeMo Gym's per-server
row schema), found in $NEMO_GYM_EXTRA_ROOTS, the current directory, then this repo.
Exit codes: 0, 1 no task_data.py or an unusable one, 2 bad options.""",
    )
)
def show_schema(
    overrides: Annotated[list[str] | None, overrides_argument("+entrypoint=resources_servers/my_env")] = None,
    verbose: Verbose = False,
) -> None:
    """Print a resources server's task-data schema as JSON Schema."""
    asks = {
        "entrypoint": (
            "which resources server?",
            "gym env schema --resources-server my_env (or +entrypoint=resources_servers/my_env)",
        )
    }
    options = read_options(overrides, ShowSchemaOptions, command="ng_show_schema", verbose=verbose, asks=asks)
    with reported_errors(verbose=verbose):
        roots = search_roots()
        schema = task_data_schema(server_folder(options.entrypoint, roots), roots)
        if schema is None:
            raise NgError(
                f"{options.entrypoint} does not ship a task_data.py schema yet. "
                "Add one exporting `TaskData` (see nemo_gym/task_data.py for the protocol)."
            )
        typer.echo(json.dumps(schema, indent=2))


def main() -> None:
    """Entry point (`ng show_schema`, `gym env schema`)."""
    app()


if __name__ == "__main__":
    main()
