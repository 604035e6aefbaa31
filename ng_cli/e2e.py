"""One-shot collection: collate a split, start the stack, collect, stop (`ng_e2e_collect_rollouts`).

    check every output             one that is a dataset, or unwritable -> exit 2 before anything
                                   is written or started (ng_cli.outputs)
    collate the split's datasets   bad rows -> exit 2 before anything starts
    check the collector's options  a bad option -> exit 2 before anything starts
    Stack.start -> wait_ready      the same launcher as ng_run (head server on a free port)
    collect_rollouts               the collector itself, given the agents' URLs directly
    Stack.stop                     always; no process is left behind

Ctrl-C and SIGTERM are a flag (`StopSignals`), read while waiting for readiness and every 0.1 s
during collection; the collection is then cancelled, which keeps every finished rollout in the
output (one `os.write` per line) and leaves the run resumable: the same command continues it.
The collated input sits beside the output (`<stem>_inputs/<split>.jsonl`), so a rerun sees the
same input file and the collector's fingerprint check passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

from rich.console import Console

from ng_cli.config.compose import ComposedConfig
from ng_cli.datasets import SPLITS, dataset_inputs, datasets_for, prepare_splits, split_files
from ng_cli.errors import ConfigError, LaunchError
from ng_cli.launcher.plan import HEAD_NAME, StackPlan
from ng_cli.launcher.signals import StopSignals
from ng_cli.launcher.stack import Stack
from ng_cli.launcher.supervise import plan_and_connect
from ng_cli.outputs import check_outputs, writes
from ng_cli.rollouts import CollectConfig, CollectResult, make_view, render_summary
from ng_cli.rollouts.collect import collect_rollouts
from ng_cli.rollouts.config import E2EOptions
from ng_cli.rollouts.progress import ProgressView
from ng_cli.rollouts.resume import OutputPaths

if TYPE_CHECKING:
    from ng_cli.launcher.ray.backend import RayBackend

__all__ = [
    "FileSink",
    "collect_end_to_end",
    "collect_on_stack",
    "collect_settings",
    "inputs_dir",
    "servers_log",
    "written_files",
]

_POLL_S = 0.1


def inputs_dir(output: Path) -> Path:
    """Where the collated input goes: `results/out.jsonl` -> `results/out_inputs/`."""
    stem = output.with_suffix("") if output.suffix == ".jsonl" else output
    return stem.with_name(stem.name + "_inputs")


def servers_log(output: Path) -> Path:
    """Where the servers' output goes: `results/out.jsonl` -> `results/out_servers.log`."""
    return output.with_name(output.stem + "_servers.log")


def written_files(settings: CollectConfig, split: str) -> list[Path]:
    """Every file this command writes: the collector's, the collated split and its metrics, the log."""
    paths = OutputPaths.for_output(settings.output_jsonl_fpath)
    collated = settings.input_jsonl_fpath
    return [*paths.all, *split_files(collated.parent, [split]), servers_log(paths.output)]


class FileSink:
    """Children's output, one `[instance] line` per line, to a log file (the console shows progress)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def __call__(self, name: str, line: str) -> None:
        with self._lock:
            self._file.write(f"[{name}] {line}\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def collect_end_to_end(config: ComposedConfig, options: E2EOptions, *, console: Console) -> int:
    """`ng_e2e_collect_rollouts`'s body; returns the collector's exit code (130/143 if interrupted).

    `options`: the command's, read (and checked) before this is called."""
    split = options.split
    settings = collect_settings(options)
    console.print(f"{split}: checking the datasets ...", style="dim", highlight=False)
    datasets = datasets_for(config, (split,))
    if not datasets:
        raise ConfigError(
            f"split: no agent in the config declares a dataset of type {split!r}",
            hint=f"choose another +split= ({', '.join(SPLITS)}) or add the dataset to an agent's datasets:",
        )
    output = settings.output_jsonl_fpath
    check_outputs(
        writes("output_jsonl_fpath", output, *written_files(settings, split)), dataset_inputs(config)
    )
    problems = Console(stderr=True, highlight=False, soft_wrap=True)
    prepare_splits({split: datasets}, settings.input_jsonl_fpath.parent, on_problem=problems.print)
    plan, backend = plan_and_connect(config)  # with a `ray` block: on that cluster, as ng_run
    try:
        plan = _on_free_head_port(config, plan)
    except BaseException:
        shutil.rmtree(plan.run_dir, ignore_errors=True)
        if backend is not None:
            backend.stop()
        raise
    log = FileSink(servers_log(output))
    try:
        return _run(plan, settings, console, log, backend)
    finally:
        log.close()


def _run(
    plan: StackPlan, settings: CollectConfig, console: Console, log: FileSink, backend: RayBackend | None
) -> int:
    with StopSignals() as signals:
        console.print(
            f"starting {len(plan.servers)} servers (their output: {log.path}) ...",
            style="dim",
            soft_wrap=True,
        )
        stack = Stack.start(plan, sink=log, backend=backend)
        result: CollectResult | None = None
        try:
            stack.wait_ready(should_stop=signals.requested)
            if signals.signum is None:
                result = collect_on_stack(stack, settings, console, should_stop=signals.requested)
        except LaunchError:
            if signals.signum is None:  # interrupted during start-up: a clean stop, not a failure
                raise
        finally:
            stack.stop(hurry=signals.hurried)
        if result is None:
            assert signals.signum is not None
            console.print(
                f"interrupted: finished rollouts are kept in {settings.output_jsonl_fpath}; "
                "run the same command again to resume",
                style="yellow",
                highlight=False,
                soft_wrap=True,
            )
            return 128 + signals.signum
    console.print(render_summary(result))
    return result.exit_code


def collect_on_stack(
    stack: Stack, settings: CollectConfig, console: Console, *, should_stop: Callable[[], bool]
) -> CollectResult | None:
    """The collector against a ready stack, given its agents' URLs directly (no head lookup), with
    live progress on `console`; None when a stop was asked for; LaunchError when a server died.
    `ng_e2e_collect_rollouts` and `ng_quickstart` both collect through here."""
    urls = {server.name: server.url for server in stack.plan.servers}
    settings = settings.model_copy(update={"agent_urls": urls})
    view = make_view(console, interval_s=settings.progress_interval_s)
    return asyncio.run(_collect(settings, view, stack, should_stop))


async def _collect(
    settings: CollectConfig, view: ProgressView, stack: Stack, should_stop: Callable[[], bool]
) -> CollectResult | None:
    """The collector's result; None when a stop was asked for; LaunchError when a server died."""
    task = asyncio.create_task(collect_rollouts(settings, view=view))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=_POLL_S)
            if done:
                return task.result()
            if should_stop():
                return None
            stack.check_alive()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def collect_settings(options: E2EOptions) -> CollectConfig:
    """The collector's options: the command's, with the collated split beside the output as the input."""
    collated = inputs_dir(options.output_jsonl_fpath) / f"{options.split}.jsonl"
    return CollectConfig(
        **dict(options.model_dump(exclude={"split", "ray", "data_source"}), input_jsonl_fpath=collated)
    )


def _on_free_head_port(config: ComposedConfig, plan: StackPlan) -> StackPlan:
    """The head server on any free port, unless the config sets one (a second ng_run may hold 11000)."""
    if config.get(f"{HEAD_NAME}.port") is not None:
        return plan
    return replace(plan, head=replace(plan.head, port=0))
