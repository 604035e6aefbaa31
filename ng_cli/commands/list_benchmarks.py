"""`ng_list_benchmarks`: the benchmarks found here (NeMo Gym's benchmarks/ configs) and whether their data is present."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import Field

from ng_cli.commands._app import Verbose, make_app, make_console, overrides_argument, read_options
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.datasets.benchmarks import Benchmark, find_benchmarks, search_roots

__all__ = ["OPTIONS", "ListBenchmarksOptions", "app", "list_benchmarks", "main"]


class ListBenchmarksOptions(CommandOptions):
    """How to print the list."""

    json_format: bool = Field(default=False, alias="json")
    """true: a JSON list instead of the table."""


OPTIONS = ListBenchmarksOptions

_EPILOG = options_help(
    ListBenchmarksOptions,
    docs="docs/list_benchmarks.md",
    notes="""Looks in benchmarks/**/config.yaml of the current directory, then of this repo (which ships none):
run it from NeMo Gym's root to list NeMo Gym's. Data is downloaded by NeMo Gym's prepare scripts
from Hugging Face, which is not offered here (ng_prepare_benchmark says why).
Exit codes: 0, 2 bad options.""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def list_benchmarks(
    overrides: Annotated[list[str] | None, overrides_argument("+json=true")] = None,
    verbose: Verbose = False,
) -> None:
    """List the benchmarks and whether their data is present."""
    options = read_options(overrides, ListBenchmarksOptions, command="ng_list_benchmarks", verbose=verbose)
    roots = search_roots()
    found = find_benchmarks(roots)
    if options.json_format:
        typer.echo(json.dumps([benchmark.as_dict() for benchmark in found]))
        return
    make_console().print(_table(found, roots), highlight=False, markup=False)


def _table(found: list[Benchmark], roots: list[Path]) -> str:
    if not found:
        return (
            f"No benchmarks found (benchmarks/**/config.yaml under {', '.join(map(str, roots))}).\n"
            "ng_cli ships no benchmark. Run this from NeMo Gym's root to list its benchmarks; their data "
            "comes from Hugging Face through NeMo Gym's prepare scripts (not offered here: see ng_prepare_benchmark)."
        )
    lines = [f"{'name':<28} {'data':<8} {'repeats':>7}  config"]
    for b in found:
        data = "present" if b.has_data else "missing"
        lines.append(f"{b.name:<28} {data:<8} {b.num_repeats or '':>7}  {b.config}")
    missing = sum(not b.has_data for b in found)
    if missing:
        lines.append(f"{missing} without data: NeMo Gym's prepare scripts download it (not offered here).")
    return "\n".join(lines)


def main() -> None:
    """Console-script entry point (`ng_list_benchmarks`)."""
    app()


if __name__ == "__main__":
    main()
