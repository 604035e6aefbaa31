"""`ng_pip_list`: the Python packages the servers run with (one environment for all of them here)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from ng_cli.commands._app import Verbose, command_config, make_app, make_console, overrides_argument
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.launcher.server_tests import resolve_server_folder

__all__ = ["OPTIONS", "PipListConfig", "app", "installed_packages", "main", "pip_list"]


app = make_app(help=__doc__)


class PipListConfig(CommandOptions):
    """NeMo Gym's `PipListConfig`."""

    entrypoint: str | None = None
    """resources_servers/<name>: the server whose packages to list (all servers share one environment
    here: NeMo Gym builds one per server)."""
    format: Literal["columns", "json", "freeze"] | None = None
    """columns (default), json or freeze, as pip list --format."""
    outdated: bool = False
    """true: only outdated packages (pip asks the package index)."""


OPTIONS = PipListConfig

_EPILOG = options_help(
    PipListConfig,
    docs="docs/pip_list.md",
    notes="""Exit codes: 0 listed, 2 no such server folder, else pip's.
Example:
  ng_pip_list +entrypoint=resources_servers/example_single_tool_call +format=json""",
)


def installed_packages() -> list[tuple[str, str]]:
    """(name, version) of every distribution this interpreter sees, sorted by name."""
    found = {(d.metadata["Name"] or "?"): d.version for d in importlib.metadata.distributions()}
    return sorted(found.items(), key=lambda item: item[0].lower())


def render_packages(packages: list[tuple[str, str]], fmt: str | None) -> str:
    """pip list's three formats."""
    if fmt == "json":
        return json.dumps([{"name": name, "version": version} for name, version in packages])
    if fmt == "freeze":
        return "\n".join(f"{name}=={version}" for name, version in packages)
    width = max([len("Package"), *(len(name) for name, _ in packages)])
    lines = [f"{'Package':<{width}} Version", f"{'-' * width} -------"]
    return "\n".join(lines + [f"{name:<{width}} {version}" for name, version in packages])


@app.command(epilog=_EPILOG)
def pip_list(
    overrides: Annotated[
        list[str] | None, overrides_argument("+entrypoint=resources_servers/<name> +format=json")
    ] = None,
    verbose: Verbose = False,
) -> None:
    """List the packages of the environment every server runs in."""
    with command_config(overrides, PipListConfig, command="ng_pip_list", verbose=verbose) as (options, _):
        if options.entrypoint is not None:
            resolve_server_folder(options.entrypoint, cwd=Path.cwd())
    if options.outdated:  # the index is a package registry: pip asks it
        command = [
            sys.executable,
            "-m",
            "pip",
            "list",
            "--outdated",
            *(["--format", options.format] if options.format else []),
        ]
        raise typer.Exit(subprocess.run(command, check=False).returncode)
    if options.format is None or options.format == "columns":
        where = options.entrypoint or "every server"
        make_console().print(
            f"  Package list for: {where}\nEnvironment: {sys.prefix}\n{'-' * 72}", highlight=False
        )
    typer.echo(render_packages(installed_packages(), options.format))


def main() -> None:
    """Console-script entry point (`ng_pip_list`)."""
    app()


if __name__ == "__main__":
    main()
