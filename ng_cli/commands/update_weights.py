"""`ng_update_weights`: every engine of a running stack's model server on a new checkpoint."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

import typer
from pydantic import Field, StrictInt
from rich.console import Console
from rich.table import Table

from ng_cli.commands._app import (
    EXIT_INTERRUPTED,
    ConfigFiles,
    Verbose,
    command_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.launcher.plan import head_url_from_config
from ng_cli.rollouts.config import STACK_FILE_COMMANDS
from ng_cli.training.client import WeightsClient
from ng_cli.upstream.versions import MAX_VERSION
from ng_cli.upstream.weights import WeightUpdateError

__all__ = ["OPTIONS", "UpdateWeightsOptions", "app", "main", "update_weights"]


app = make_app(help=__doc__)


class UpdateWeightsOptions(CommandOptions):
    """One update from a checkpoint directory."""

    path: str = Field(min_length=1)
    """The checkpoint directory (absolute: the engines read it themselves), or a weights delta
    directory (`ng_delta.json`: only what changed since the weights served now; docs/training.md)."""
    version: StrictInt = Field(ge=1, le=MAX_VERSION)
    """The weight version it becomes (an integer: `1e3` or `true` is refused); versions only go up."""
    mode: Literal["keep", "wait", "abort"] = "keep"
    """What happens to calls in flight: keep (they pause and go on under the new weights), wait (they
    finish first), abort (they are cut short and sent again)."""
    model_server: str | None = None
    """The model server instance (default: the only one that takes weight updates)."""
    head_server_url: str | None = None
    """The running stack's head server (default: from head_server, else http://127.0.0.1:11000)."""
    head_server: dict[str, Any] | None = None
    """{host, port} of the head server, as ng_run was given it."""
    timeout_s: float = Field(default=3600.0, gt=0)
    """The longest this command waits for the update (each phase also has its own deadline)."""


OPTIONS = UpdateWeightsOptions

_EPILOG = options_help(
    UpdateWeightsOptions,
    docs="docs/training.md",
    notes="""The model server stops admitting calls, pauses every engine, reloads, verifies that every engine
holds the same finite weights, resets the prefix cache, sets the version, resumes, and admits again.
If any engine fails, every engine goes back to the previous checkpoint and the version stays. The
update runs to its end whether or not this command still waits (timeout_s, Ctrl-C): ng_status tells.
Exit codes: 0 updated; 1 unreachable, or no answer within timeout_s (the update goes on: ng_status
tells how it ended); 2 refused or rolled back (the reason names the engine and the phase); 3 the
rollback failed too (the checkpoint from before is gone): that engine is held out, paused, until
the next update succeeds on it; 130 Ctrl-C (SIGINT): this command stops waiting, the update goes on.
Example:
  ng_update_weights +path=/ckpt/step-3 +version=3""",
)


@app.command(epilog=_EPILOG)
def update_weights(
    overrides: Annotated[list[str] | None, overrides_argument("+path=/ckpt/step-3 +version=3")] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Load a checkpoint into every engine of a running stack and serve it as a new version."""
    with command_config(
        overrides,
        UpdateWeightsOptions,
        command="ng_update_weights",
        verbose=verbose,
        config_files=config,
        shared=STACK_FILE_COMMANDS,
        asks={
            "path": ("which checkpoint directory?", "ng_update_weights +path=/ckpt/step-3 +version=3"),
            "version": ("which version does it become?", "ng_update_weights +path=/ckpt/step-3 +version=3"),
        },
    ) as (options, composed):
        client = WeightsClient.connect(
            head_url_from_config(composed), model_server=options.model_server, timeout_s=options.timeout_s
        )
        result = updated(client, options)
    console = make_console()
    console.print(
        timings_table(
            result["engines"],
            title=f"{client.server}: version {result['previous_version']} -> {result['version']}",
        )
    )
    console.print(
        f"version {result['version']} ({result['path']}) in {result['window_s']:.3f} s from pause to resume, "
        f"mode {result['mode']}; {len(result['spanning_calls'])} call(s) in flight span the update",
        highlight=False,
    )
    for engine, problem in (result.get("problems") or {}).items():
        console.print(
            f"warning: {engine}: {problem} (taken out of the pool)", style="yellow", highlight=False
        )
    raise typer.Exit(0)


def updated(client: WeightsClient, options: UpdateWeightsOptions) -> dict[str, Any]:
    """The update's answer; Ctrl-C stops the wait (exit 130) with what becomes of the update, which
    the model server runs to its end whoever waits (`upstream/operations.py`)."""
    with sigint_interrupts():
        try:
            return client.update(options.path, version=options.version, mode=options.mode)
        except WeightUpdateError as error:
            if error.timings:
                make_console(stderr=True).print(
                    timings_table(error.timings, title="phases before the rollback")
                )
            raise
        except KeyboardInterrupt:
            Console(stderr=True, highlight=False, soft_wrap=True).print(
                f"interrupted: stopped waiting for the update to version {options.version}; if it reached "
                f"{client.server}, the model server finishes it or rolls it back on its own (ng_status "
                "shows the version it ends on)",
                style="yellow",
            )
            raise typer.Exit(EXIT_INTERRUPTED) from None


@contextmanager
def sigint_interrupts() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here even when this process started with it ignored.

    A shell without job control (a script's `ng_update_weights ... &`, a CI script's background
    pytest) starts a command with SIGINT ignored, and Python keeps that: Ctrl-C or `kill -INT` was
    dropped, and the command waited for the update's end (exit 0) or for as long as the model server
    held it (hours). ng_run's `StopSignals` takes SIGINT the same way. Only the main thread may set
    a handler: called in-process from another thread, this changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def timings_table(engines: dict[str, Any], *, title: str) -> Table:
    """One row per engine, one column per phase (seconds)."""
    phases: list[str] = []
    for timings in engines.values():
        phases += [phase for phase in timings if phase not in phases]
    table = Table(title=title, title_justify="left")
    table.add_column("engine")
    for phase in phases:
        table.add_column(f"{phase} s", justify="right")
    for engine, timings in engines.items():
        table.add_row(engine, *(f"{timings[phase]:.3f}" if phase in timings else "-" for phase in phases))
    return table


def main() -> None:
    """Console-script entry point (`ng_update_weights`)."""
    app()
