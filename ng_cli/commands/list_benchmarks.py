"""`ng_list_benchmarks`: the benchmarks found here, under NeMo Gym's names, and whether their data is present."""

from __future__ import annotations

from typing import Annotated

from ng_cli.commands._app import Verbose, make_app, overrides_argument, read_options, reported_errors
from ng_cli.commands.list_components import CatalogOptions, show_catalog
from ng_cli.config.command_options import options_help

__all__ = ["OPTIONS", "ListBenchmarksOptions", "app", "list_benchmarks", "main"]


class ListBenchmarksOptions(CatalogOptions):
    """How to print the list, and which benchmarks."""


OPTIONS = ListBenchmarksOptions

_EPILOG = options_help(
    ListBenchmarksOptions,
    docs="docs/list_benchmarks.md",
    notes="""Finds NeMo Gym's benchmarks/ configs (and manifests) in $NEMO_GYM_EXTRA_ROOTS, the current
directory, then this repo (which ships none), and names them as NeMo Gym does: a folder's
config.yaml by the folder (aime24), any other config by its path (aime24/config_with_system).
Run it from NeMo Gym's root to list NeMo Gym's. Data is downloaded by NeMo Gym's prepare scripts
from Hugging Face, which is not offered here (ng_prepare_benchmark says why).
Exit codes: 0, 2 bad options or an unknown name.""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def list_benchmarks(
    overrides: Annotated[list[str] | None, overrides_argument("+json=true")] = None,
    verbose: Verbose = False,
) -> None:
    """List the benchmarks and whether their data is present."""
    options = read_options(overrides, ListBenchmarksOptions, command="ng_list_benchmarks", verbose=verbose)
    with reported_errors(verbose=verbose):
        show_catalog(options, kind="benchmark", data=True)


def main() -> None:
    """Console-script entry point (`ng_list_benchmarks`)."""
    app()


if __name__ == "__main__":
    main()
