"""`ng_test_all`: run every server folder's tests and print a pass/fail table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from ng_cli.commands._app import Verbose, command_config, make_app, make_console, overrides_argument
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.config.nemo_gym_options import not_offered_table
from ng_cli.config.paths import display_path, repo_root
from ng_cli.launcher.render import suites_table
from ng_cli.launcher.server_tests import SuiteResult, find_server_folders, run_suite

__all__ = ["OPTIONS", "TestAllOptions", "app", "main", "run_all_tests"]


class TestAllOptions(CommandOptions):
    """ng_test_all has no options of its own; NeMo Gym's `TestAllConfig` options are refused by name."""

    not_offered = not_offered_table(
        {
            "fail_on_total_and_test_mismatch": (
                "compares NeMo Gym's server count with its tested count; here every folder with tests runs",
                "leave it out",
            ),
            "delete_venvs_after_each_test": (
                "removes each server's virtual environment; here there is one environment",
                "leave it out",
            ),
            "num_shards": ("splits the suites over CI jobs", "run ng_test +entrypoint=<folder> per folder"),
            "shard_index": ("splits the suites over CI jobs", "run ng_test +entrypoint=<folder> per folder"),
            "setup_only": ("builds the per-server environments only; there are none here", "leave it out"),
        }
    )


OPTIONS = TestAllOptions

_EPILOG = options_help(
    TestAllOptions,
    docs="docs/running.md",
    notes="""Runs `python -m pytest <folder>` for every resources_servers/*, responses_api_models/* and
responses_api_agents/* folder that has tests, one after another, in this environment.
The output of a failed suite (its last 40 lines) is shown.
Exit codes: 0 all passed, 1 any failed, 2 bad options.""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def run_all_tests(
    overrides: Annotated[list[str] | None, overrides_argument("(none of its own)")] = None,
    verbose: Verbose = False,
) -> None:
    """Run each server folder's test suite and summarise."""
    console = make_console()
    with command_config(overrides, TestAllOptions, command="ng_test_all", verbose=verbose):
        results = [_run(folder, console) for folder in find_server_folders(repo_root())]
    console.print(suites_table(results))
    raise typer.Exit(0 if all(result.passed for result in results) else 1)


def _run(folder: Path, console: Console) -> SuiteResult:
    console.print(f"running {display_path(folder)} ...", style="dim")
    result = run_suite(folder, pytest_args=["-q"], capture=True)
    if not result.passed:
        console.print(Text("\n".join(result.output_tail)))
    return result


def main() -> None:
    """Console-script entry point (`ng_test_all`)."""
    app()
