"""What every listing command (`ng_list_benchmarks`, `gym list ...`, `gym search`) shares: the
options they read, how a table and one component's view are printed, and the errors for a name
that is not there. The output is NeMo Gym 0.7.0's (`nemo_gym/cli/utils.py`): the same JSON, the
same words."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import typer
from pydantic import Field
from rich.table import Table

from ng_cli.commands._app import make_console
from ng_cli.config.command_options import CommandOptions
from ng_cli.errors import ConfigError

__all__ = ["ListOptions", "inspection", "nothing_found", "print_json", "print_table", "unknown"]


class ListOptions(CommandOptions):
    """What `gym list <components> [NAME] [--json]` and `gym search` set."""

    json_format: bool = Field(default=False, alias="json")
    """true: JSON instead of the table."""
    component_name: str | None = None
    """One component to show instead of the list (NeMo Gym's `gym list <components> NAME`)."""
    query: str | None = None
    """Only the components matching it: a substring, or close to a word (NeMo Gym's `gym search`)."""


def print_json(payload: Any) -> None:
    typer.echo(json.dumps(payload))


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    make_console().print(table, highlight=False, markup=False)


def nothing_found(plural: str, query: str | None) -> None:
    """NeMo Gym's 'nothing to show' line."""
    typer.echo(f"No {plural} match '{query}'." if query else f"No {plural} found.")


def unknown(name: str, candidates: Iterable[str], noun: str) -> ConfigError:
    """`Unknown <noun> '<name>'.`, with the closest name NeMo Gym would suggest."""
    close = difflib.get_close_matches(name, list(candidates), n=1)
    suggestion = f" Did you mean `{close[0]}`?" if close else ""
    return ConfigError(f"Unknown {noun} '{name}'.{suggestion}", hint=f"`gym list {_plural(noun)}` lists them")


def _plural(noun: str) -> str:
    return "resources-servers" if noun == "resources server" else f"{noun}s"


def inspection(
    *,
    json_output: bool,
    name: str,
    noun: str,
    details: Mapping[str, str],
    domain: str | None = None,
    description: str | None = None,
    usage: str | None = None,
) -> None:
    """`gym list <components> NAME`: one component, as NeMo Gym's `render_component_inspection`."""
    if json_output:
        payload = {"name": name, "type": noun, "domain": domain, "description": description}
        print_json(payload | {"details": dict(details), "usage_example": usage})
        return
    header = f"The {name} {noun}" + (f" (domain: {domain})" if domain else "")
    sections = [header, *([description] if description else [])]
    if details:
        sections.append("Details:\n" + "\n".join(f"{label}: {value}" for label, value in details.items()))
    if usage:
        sections.append(f"Usage example:\n{usage}")
    make_console().print("\n\n".join(sections), soft_wrap=True, highlight=False, markup=False)
