"""Running a stack in the foreground until a signal or a death: what `ng_run` does.

    plan -> Stack.start -> wait_ready -> (table, ready file) -> watch -> stop
    exit 0 after SIGTERM, 130 after Ctrl-C; a child that dies (or never gets ready) is a
    LaunchError (exit 1) naming it, its exit code and its last 50 lines.

Whatever happens, `Stack.stop()` runs: no orphan process and no bound port survives, and the
ready file (which exists exactly while the stack is up) is removed.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from rich.console import Console

from ng_cli.config.command_options import command_options
from ng_cli.config.compose import ComposedConfig
from ng_cli.config.run_options import RunOptions
from ng_cli.config.secrets import mask
from ng_cli.errors import LaunchError
from ng_cli.launcher.check import check_instances, print_warnings
from ng_cli.launcher.packages import run_packages_step
from ng_cli.launcher.plan import StackPlan, plan_stack
from ng_cli.launcher.process import LineSink
from ng_cli.launcher.ray.config import read_ray_config
from ng_cli.launcher.render import engine_notes, engines_table, placement_table, plan_table, ready_table
from ng_cli.launcher.signals import StopSignals, exit_code_for
from ng_cli.launcher.stack import Stack, make_run_dir

if TYPE_CHECKING:
    from ng_cli.launcher.ray.backend import RayBackend

__all__ = ["launch", "plan_and_connect", "run_stack"]


def launch(
    config: ComposedConfig,
    *,
    console: Console,
    sink: LineSink | None = None,
    options: RunOptions | None = None,
) -> int:
    """`ng_run`'s body: print the plan (`+dry_run=true`) or run the stack; returns the exit code.

    `options`: ng_run's, read by the command before anything else (default: read here)."""
    if options is None:
        options = command_options(config, RunOptions, command="ng_run")
    warnings: list[str] = []
    stopped = run_packages_step(  # before the check: it imports every app.py, and so their packages
        config,
        options,
        say=lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True),
        warn=warnings.append,
    )
    if stopped is not None:
        return stopped
    if not options.dry_run:
        _load_head_in_background()
    print_warnings(warnings + check_instances(config))  # what start-up would refuse is refused here
    if options.dry_run:
        plan = plan_stack(config, run_dir=Path(tempfile.gettempdir()) / "ng_run-dry-run")
        _print_engine_plan(plan, console)
        console.print(plan_table(plan))
        redactor = plan.redactor()
        details = {
            engine.name: {
                "command": redactor.text(" ".join(engine.argv())),
                "env": mask(dict(engine.env), redactor=redactor),
            }
            for engines in plan.engines
            for engine in engines.engines
        }
        details |= {
            row["name"]: {key: row[key] for key in ("app_path", "command", "config")}
            for row in plan.describe()
        }
        console.print(yaml.safe_dump(details, sort_keys=False), markup=False, highlight=False, soft_wrap=True)
        return 0
    plan, backend = plan_and_connect(config)

    _print_engine_plan(plan, console)

    def show(stack: Stack) -> None:
        console.print(ready_table(stack.plan, stack.servers_status(), stack.ready_s, stack.engines.rows()))

    ready_file = options.ready_file.expanduser().resolve() if options.ready_file else None
    return run_stack(plan, on_ready=show, ready_file=ready_file, sink=sink, backend=backend)


def plan_and_connect(config: ComposedConfig) -> tuple[StackPlan, RayBackend | None]:
    """The plan, and the Ray cluster of a `ray` block (Ray is imported only here, and only then).

    An existing cluster is joined first, so engines are planned on its GPUs; a private `local`
    one runs on this machine's GPUs, so it is planned first and started with the CPUs it needs."""
    ray = read_ray_config(config, list(config.instances))
    backend: RayBackend | None = None
    run_dir = make_run_dir()
    try:
        if ray is not None and not ray.is_local:
            from ng_cli.launcher.ray.backend import RayBackend

            backend = RayBackend.connect(ray)
            plan = plan_stack(config, run_dir=run_dir, cluster_gpus=backend.total_gpus())
        else:
            plan = plan_stack(config, run_dir=run_dir)
            if ray is not None and plan.placement is not None:
                from ng_cli.launcher.ray.backend import RayBackend

                backend = RayBackend.connect(ray, cpus_needed=plan.placement.cpus_needed())
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        if backend is not None:
            backend.stop()
        raise
    return plan, backend


def _print_engine_plan(plan: StackPlan, console: Console) -> None:
    if plan.engines:
        console.print(engines_table(plan.engines))
        for note in engine_notes(plan.engines):
            console.print(note)
    if plan.placement is not None:
        console.print(placement_table(plan.placement, address=plan.ray.address if plan.ray else "?"))


def run_stack(
    plan: StackPlan,
    *,
    on_ready: Callable[[Stack], None],
    ready_file: Path | None = None,
    sink: LineSink | None = None,
    backend: RayBackend | None = None,
) -> int:
    """Start `plan`, call `on_ready` once every server answers, then supervise; returns the exit code."""
    with StopSignals() as signals:
        stack = Stack.start(plan, sink=sink, backend=backend)
        try:
            stack.wait_ready(should_stop=signals.requested)
            on_ready(stack)
            if ready_file is not None:
                stack.write_ready_file(ready_file)
            stack.watch(should_stop=signals.requested)
        except LaunchError:
            if signals.signum is not None:  # interrupted during start-up: a clean stop, not a failure
                return exit_code_for(signals.signum)
            raise
        finally:
            stack.stop(hurry=signals.hurried)
            if ready_file is not None:
                ready_file.unlink(missing_ok=True)
        assert signals.signum is not None
        return exit_code_for(signals.signum)


def _load_head_in_background() -> None:
    """Import the head server (FastAPI, uvicorn) while the config check's subprocess runs: ng_run
    only waits for it then, so the import costs no wall time, where after the spawn it competed
    with the servers' own start-up for the cores (issue 38)."""
    threading.Thread(target=importlib.import_module, args=("ng_cli.head",), name="ng-load-head").start()
