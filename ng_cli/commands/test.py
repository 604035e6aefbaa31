"""`ng_test`: run one server folder's tests (and optionally check its example data)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ng_cli.commands._app import Verbose, command_config, make_app, overrides_argument, print_error
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.errors import DataError
from ng_cli.launcher.server_tests import resolve_server_folder, run_suite, validate_example_data

__all__ = ["OPTIONS", "TestOptions", "app", "main", "run_tests"]


class TestOptions(CommandOptions):
    """NeMo Gym's `TestConfig`: which server folder, and whether to check its example data too."""

    entrypoint: str
    """The server folder, e.g. resources_servers/example_single_tool_call."""
    should_validate_data: bool = False
    """true: also check <folder>/data/example.jsonl (one Responses input per line)."""


OPTIONS = TestOptions
_EXAMPLE = "ng_test +entrypoint=resources_servers/example_single_tool_call +should_validate_data=true"

_EPILOG = options_help(
    TestOptions,
    docs="docs/running.md",
    notes=f"""Exit codes: pytest's (0 passed, 1 tests failed, ...); 2 when the data check fails or on a config error.
Example:
  {_EXAMPLE}""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def run_tests(
    overrides: Annotated[
        list[str] | None, overrides_argument("+entrypoint=<server_type>/<name> [+should_validate_data=true]")
    ] = None,
    verbose: Verbose = False,
) -> None:
    """Run `python -m pytest <folder>` with this environment's Python; exit with pytest's code."""
    with command_config(
        overrides,
        TestOptions,
        command="ng_test",
        verbose=verbose,
        asks={"entrypoint": ("which server folder?", _EXAMPLE)},
    ) as (options, _):
        folder = resolve_server_folder(options.entrypoint, cwd=Path.cwd())
        code = run_suite(folder).exit_code
        if options.should_validate_data:
            code = _validate(folder, code)
    raise typer.Exit(code)


def _validate(folder: Path, code: int) -> int:
    """Check the example data after the tests ran: both outcomes are reported."""
    try:
        rows = validate_example_data(folder)
    except DataError as error:
        print_error(error)
        return code or error.exit_code
    Console(stderr=True).print(f"example data: {rows} valid rows", style="green")
    return code


def main() -> None:
    """Console-script entry point (`ng_test`)."""
    app()
