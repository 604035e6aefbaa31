"""Each docs table of a command's options lists exactly the keys of its options model.

A table is marked `<!-- options: ng_<command> -->` on the line above it; its first column names
the keys in backticks (one row may name several). Every command has exactly one such table
(docs/commands.md, or the command's own page).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ng_cli.config.command_options import CommonOptions, option_names
from tests.fixtures.commands import command_options_models

DOCS = Path(__file__).resolve().parents[3] / "docs"
_MARKER = re.compile(r"<!-- options: (ng_[a-z0-9_]+) -->\n((?:\|.*\n?)+)")


def marked_tables() -> dict[str, list[set[str]]]:
    """Command -> the key sets of every table marked for it, over every docs page."""
    found: dict[str, list[set[str]]] = {}
    for page in sorted(DOCS.glob("*.md")):
        for command, table in _MARKER.findall(page.read_text(encoding="utf-8")):
            rows = table.strip().splitlines()[2:]  # after the header and the |---| line
            keys = {key for row in rows for key in re.findall(r"`([a-z_]+)`", row.split("|")[1])}
            found.setdefault(command, []).append(keys)
    return found


MODELS = command_options_models()


@pytest.mark.parametrize("command", sorted(MODELS))
def test_the_docs_table_lists_the_models_fields(command: str) -> None:
    tables = marked_tables().get(command, [])
    assert len(tables) == 1, f"{command}: {len(tables)} marked options tables in docs/"
    expected = set(option_names(MODELS[command])) - set(option_names(CommonOptions))
    assert tables[0] == expected


def test_every_marked_table_names_a_command() -> None:
    assert set(marked_tables()) <= set(MODELS)


def test_a_table_that_misses_a_key_is_caught() -> None:
    text = "<!-- options: ng_x -->\n| Key | Default | Meaning |\n|---|---|---|\n| `a`, `b` | 1 | m |\n"
    assert _MARKER.findall(text)[0][0] == "ng_x"
    rows = _MARKER.findall(text)[0][1].strip().splitlines()[2:]
    assert {k for row in rows for k in re.findall(r"`([a-z_]+)`", row.split("|")[1])} == {"a", "b"}
