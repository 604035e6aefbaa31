"""`ng_help`: every `ng_*` command (and `ng`/`gym`) with its one-line summary."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from typing import Annotated

import typer

from ng_cli.commands._app import make_app, make_console

__all__ = ["app", "command_summaries", "main", "show_help"]

_DISTRIBUTION = "ng-cli"
_UMBRELLAS = ("ng", "gym")
_NOT_OFFERED_MODULE = "ng_cli.commands.not_offered"

app = make_app(help=__doc__)


@app.command(epilog="Each command's --help lists the config keys it reads. Exit code: 0.")
def show_help(_overrides: Annotated[list[str] | None, typer.Argument(hidden=True)] = None) -> None:
    """List the commands this package installs."""
    summaries = command_summaries()
    width = max(map(len, summaries), default=0)
    make_console().print(
        "\n".join(f"{name:<{width}}  {summary}" for name, summary in summaries.items()), highlight=False
    )


def command_summaries() -> dict[str, str]:
    """Console script name -> the first line of its module's docstring (read, not imported)."""
    scripts = sorted(
        (entry for entry in importlib.metadata.entry_points(group="console_scripts") if _is_ours(entry)),
        key=lambda entry: entry.name,
    )
    return {entry.name: _summary(entry.module, entry.name) for entry in scripts}


def _is_ours(entry: importlib.metadata.EntryPoint) -> bool:
    dist = entry.dist
    named = entry.name.startswith("ng_") or entry.name in _UMBRELLAS
    return named and dist is not None and dist.name == _DISTRIBUTION


def _summary(module: str, name: str) -> str:
    """The docstring's first line without its "`ng_x`: " prefix (parsing is fast, importing is not);
    for a NeMo Gym command not offered here, why not."""
    if module == _NOT_OFFERED_MODULE:
        from ng_cli.commands.not_offered import NOT_OFFERED

        reason = NOT_OFFERED.get(name.removeprefix("ng_"))
        return f"not offered: {reason[0]}" if reason else "(not a command)"
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return "(module not found)"
    with open(spec.origin, encoding="utf-8") as source:
        docstring = ast.get_docstring(ast.parse(source.read())) or ""
    first = docstring.strip().splitlines()[0] if docstring.strip() else ""
    return first.removeprefix(f"`{name}`: ").removeprefix("`ng` / `gym`: ") or "(no summary)"


def main() -> None:
    """Console-script entry point (`ng_help`)."""
    app()
