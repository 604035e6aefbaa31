"""Plumbing every console script shares: the Typer app, error rendering and exit codes.

An `NgError` is a failure we can explain: it is printed once, without a traceback, as

    error: conf/stack.yaml:14  policy.base_url: expected an http(s) URL, got 'localhost:8000'
    hint: write it as http://localhost:8000/v1

and the process exits with the error's code (2 for config errors). Ctrl-C exits 130. Anything
else is a bug and keeps its traceback; `+verbose=true` (or `--verbose`) shows the traceback of
an NgError too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from ng_cli.errors import NgError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ng_cli.config.compose import ComposedConfig

__all__ = [
    "EXIT_INTERRUPTED",
    "ConfigFiles",
    "Verbose",
    "command_config",
    "composed_config",
    "make_app",
    "make_console",
    "overrides_argument",
    "print_error",
    "read_options",
    "reported_errors",
    "run_command",
    "wants_verbose",
    "with_config_files",
]

EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C, as shells report SIGINT (128 + 2)."""

ConfigFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="A YAML file to merge; repeatable; same as +config_paths=[...].",
    ),
]
"""The `-c/--config` option every config-reading command shares."""

Verbose = Annotated[bool, typer.Option("--verbose", help="Show the traceback of an error.")]
"""`--verbose` (or the override `+verbose=true`): keep tracebacks."""


def overrides_argument(help_text: str) -> Any:
    """The positional Hydra-style overrides argument, with a command-specific example."""
    return typer.Argument(help=help_text, metavar="OVERRIDES", show_default=False)


T = TypeVar("T")
M = TypeVar("M", bound="BaseModel")
_VERBOSE = re.compile(r"^\+{0,2}verbose=(.*)$")


def make_app(help: str | None) -> typer.Typer:
    """A single-command Typer app that looks the same in every script.

    Hydra-style arguments (`+x=y`, `++x=y`, `~x`) pass through as plain arguments; locals are
    never shown in tracebacks (they hold secrets); no shell-completion commands.
    """
    return typer.Typer(
        help=help,
        add_completion=False,
        pretty_exceptions_show_locals=False,
        rich_markup_mode=None,
        context_settings={
            "help_option_names": ["-h", "--help"],
            "ignore_unknown_options": True,
            "allow_extra_args": True,
        },
    )


def wants_verbose(overrides: Sequence[str] | None) -> bool:
    """Whether the overrides ask for tracebacks (`+verbose=true`, or any other way every option says true)."""
    from ng_cli.config.command_options import is_true

    found = (_VERBOSE.match(override.strip()) for override in overrides or ())
    return any(match is not None and is_true(match.group(1).strip("'\"")) for match in found)


@contextmanager
def composed_config(
    overrides: Sequence[str] | None, config_files: Sequence[Path | str] | None, *, verbose: bool
) -> Iterator[ComposedConfig]:
    """The preamble of every config-reading command: compose `-c` files and overrides, and report
    an `NgError` raised while composing or in the `with` body as a message and an exit code."""
    from ng_cli.config.compose import compose_config  # Hydra: only commands that compose pay for it

    args = with_config_files(overrides, config_files)
    with reported_errors(verbose=verbose or wants_verbose(args)):
        yield compose_config(args)


@contextmanager
def command_config(
    overrides: Sequence[str] | None,
    model: type[M],
    *,
    command: str,
    verbose: bool,
    config_files: Sequence[Path | str] | None = None,
    asks: Mapping[str, tuple[str, str]] | None = None,
    shared: Mapping[str, type[BaseModel]] | None = None,
    shared_on_command_line: bool = False,
) -> Iterator[tuple[M, ComposedConfig]]:
    """`composed_config` and the command's options read from it (`command_options`, whose keywords
    these are): every options-reading command's preamble, its errors and the `with` body's reported."""
    from ng_cli.config.command_options import command_options

    with composed_config(overrides, config_files, verbose=verbose) as composed:
        options = command_options(
            composed,
            model,
            command=command,
            asks=asks,
            shared=shared,
            shared_on_command_line=shared_on_command_line,
        )
        yield options, composed


def read_options(
    overrides: Sequence[str] | None,
    model: type[M],
    *,
    command: str,
    verbose: bool,
    asks: Mapping[str, tuple[str, str]] | None = None,
) -> M:
    """The options of a command whose work needs nothing else from the config (errors reported)."""
    with command_config(overrides, model, command=command, verbose=verbose, asks=asks) as (options, _):
        return options


def with_config_files(
    overrides: Sequence[str] | None, config_files: Sequence[Path | str] | None
) -> list[str]:
    """Turn `-c a.yaml -c b.yaml` into `+config_paths=[a.yaml,b.yaml]` after the typed overrides.

    Several `config_paths` overrides are concatenated by the composer, so files given with `-c`
    join (after) any `+config_paths=[...]` the user typed.
    """
    result = list(overrides or [])
    if config_files:
        result.append("+config_paths=[" + ",".join(_quoted(str(path)) for path in config_files) + "]")
    return result


def make_console(*, stderr: bool = False) -> Console:
    """A rich console; when output is a pipe or a file, wide enough that tables keep every column."""
    console = Console(stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, width=160)
    return console


def print_error(exc: NgError, console: Console | None = None) -> None:
    """Print `error: ...` and `hint: ...` to stderr (never as rich markup: messages hold brackets)."""
    console = console or Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(Text.assemble(("error: ", "bold red"), exc.message))
    if exc.hint:
        console.print(Text.assemble(("hint: ", "bold yellow"), exc.hint))


@contextmanager
def reported_errors(*, verbose: bool = False) -> Iterator[None]:
    """Turn NgError into a printed message and its exit code; Ctrl-C into exit 130."""
    try:
        yield
    except NgError as exc:
        if verbose:
            raise
        print_error(exc)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted", style="yellow")
        raise typer.Exit(EXIT_INTERRUPTED) from None


def run_command(fn: Callable[[], T], *, verbose: bool = False) -> T:
    """Call `fn` inside `reported_errors`."""
    with reported_errors(verbose=verbose):
        return fn()


def _quoted(path: str) -> str:
    """Quote a path for Hydra's grammar when it holds characters the grammar treats specially."""
    if re.fullmatch(r"[\w./~-]+", path):
        return path
    # Hydra unescapes backslashes only in front of a quote or at the end of a quoted string.
    escaped = re.sub(
        r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\" + m.group(2) if m.group(2) else ""), path
    )
    return f"'{escaped}'"
