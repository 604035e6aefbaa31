"""`ng_version`: this package's version, Python, platform, and the engine environment's vLLM, torch and Ray."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from pydantic import Field

from ng_cli.commands._app import Verbose, make_app, make_console, overrides_argument, read_options
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.versions import Versions, installed_versions

__all__ = ["OPTIONS", "VersionOptions", "app", "main", "version"]


class VersionOptions(CommandOptions):
    """NeMo Gym's `VersionConfig` (its `json` key)."""

    json_format: bool = Field(default=False, alias="json")
    """true: print one JSON object instead of lines."""


OPTIONS = VersionOptions

_EPILOG = options_help(
    VersionOptions,
    docs="docs/version.md",
    notes="""The engine environment is the vLLM venv ($NG_VLLM_VENV, default ~/.cache/ng_cli/vllm-cpu-venv);
anything not installed is printed as "absent". Exit codes: 0, 2 bad options.""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def version(
    overrides: Annotated[list[str] | None, overrides_argument("[+json=true]")] = None,
    verbose: Verbose = False,
) -> None:
    """Print the versions, for bug reports and for checking an install."""
    options = read_options(overrides, VersionOptions, command="ng_version", verbose=verbose)
    as_json = options.json_format
    versions = installed_versions()
    if as_json:
        typer.echo(json.dumps(versions.to_dict(), indent=2))
    else:
        make_console().print(render_lines(versions), highlight=False)


def render_lines(versions: Versions) -> str:
    """`name  version` lines, `absent` where something is not installed."""
    engine = versions.engine
    rows = [
        ("ng_cli", versions.ng_cli),
        ("python", versions.python),
        ("platform", versions.platform),
        ("ray", versions.ray),
        ("engine env", f"{engine.python_path} ({engine.status})"),
    ]
    if engine.status == "ok":
        rows += [
            ("  python", engine.python),
            ("  vllm", engine.vllm),
            ("  torch", engine.torch),
            ("  ray", engine.ray),
        ]
    return "\n".join(f"{name:<12}{value or 'absent'}" for name, value in rows)


def main() -> None:
    """Console-script entry point (`ng_version`)."""
    app()
