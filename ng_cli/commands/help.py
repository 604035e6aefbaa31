"""`ng_help`: every `ng_*` command (and `ng`/`gym`) with its one-line summary."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from typing import Annotated

from ng_cli.commands._app import Verbose, make_app, make_console, overrides_argument, read_options
from ng_cli.config.command_options import CommandOptions, options_help

__all__ = ["OPTIONS", "HelpOptions", "app", "command_summaries", "main", "nemo_gym_aliases", "show_help"]

_DISTRIBUTION = "ng-cli"
_UMBRELLAS = ("ng", "gym")
_NOT_OFFERED_MODULE = "ng_cli.commands.not_offered"

app = make_app(help=__doc__)


class HelpOptions(CommandOptions):
    """ng_help has no options of its own."""


OPTIONS = HelpOptions


@app.command(
    epilog=options_help(
        HelpOptions,
        docs="docs/help.md",
        notes="Each command's --help lists the config keys it reads. Exit codes: 0, 2 bad options.",
    )
)
def show_help(
    overrides: Annotated[list[str] | None, overrides_argument("(none of its own)")] = None,
    verbose: Verbose = False,
) -> None:
    """List the commands this package installs."""
    read_options(overrides, HelpOptions, command="ng_help", verbose=verbose)
    summaries = command_summaries()
    width = max(map(len, summaries), default=0)
    lines = [f"{name:<{width}}  {summary}" for name, summary in summaries.items()]
    aliases = nemo_gym_aliases()
    if aliases:
        lines.append(
            f"nemo_gym_<command>: NeMo Gym's alias of ng_<command> ({len(aliases)} installed: "
            "every ng_ name NeMo Gym documents)"
        )
    make_console().print("\n".join(lines), highlight=False)


def command_summaries() -> dict[str, str]:
    """Console script name -> the first line of its module's docstring (read, not imported)."""
    scripts = sorted(
        (entry for entry in importlib.metadata.entry_points(group="console_scripts") if _is_ours(entry)),
        key=lambda entry: entry.name,
    )
    return {entry.name: _summary(entry.module, entry.name) for entry in scripts}


def nemo_gym_aliases() -> list[str]:
    """The installed `nemo_gym_*` console scripts (NeMo Gym's aliases of the `ng_*` names)."""
    return sorted(
        entry.name
        for entry in importlib.metadata.entry_points(group="console_scripts")
        if entry.name.startswith("nemo_gym_") and entry.dist is not None and entry.dist.name == _DISTRIBUTION
    )


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
