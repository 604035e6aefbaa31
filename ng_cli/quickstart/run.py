"""Running the quickstart: each phase with a header and a timing, and everything stopped at the end.

    embedded model -> Stack (the launcher ng_run and ng_e2e_collect_rollouts use: the CPU engine
                      of local_vllm_model first, then the servers) -> the collector -> stop

All in this process, as `ng_e2e_collect_rollouts` runs: one supervisor (`launcher.stack.Stack`)
and one readiness wait. Ctrl-C and SIGTERM are a flag (`StopSignals`) read while the stack gets
ready and while rollouts are collected; whatever happens (a failed phase, a signal), the last
phase stops the stack, engine included; a second signal only hurries that stop, it cannot
leave an engine behind.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from ng_cli.config.compose import ComposedConfig, compose_config
from ng_cli.config.paths import ENV_YAML_ENV
from ng_cli.e2e import FileSink, collect_on_stack
from ng_cli.errors import LaunchError, NgError
from ng_cli.launcher.signals import StopSignals
from ng_cli.launcher.stack import Stack
from ng_cli.launcher.supervise import plan_and_connect
from ng_cli.quickstart.plan import QuickstartPlan, collect_overrides, stack_overrides, write_env_file
from ng_cli.quickstart.report import rollout_report
from ng_cli.rollouts import collect_config_from, render_summary
from ng_cli.rollouts.resume import OutputPaths

__all__ = ["EXIT_INTERRUPTED", "Phases", "run_quickstart"]

EXIT_INTERRUPTED = 130
_PHASE_COUNT = 4


@dataclass
class Phases:
    """Prints a header per phase and remembers how long each took and how it ended."""

    console: Console
    total: int
    rows: list[tuple[str, float, str]] = field(default_factory=list)

    @contextlib.contextmanager
    def phase(self, title: str, *, is_last: bool = False) -> Iterator[None]:
        number = self.total if is_last else len(self.rows) + 1
        self.console.print(Rule(Text(f"[{number}/{self.total}] {title}", style="bold"), align="left"))
        started = time.monotonic()
        outcome = "failed"
        try:
            yield
            outcome = "ok"
        except KeyboardInterrupt:
            outcome = "interrupted"
            raise
        finally:
            seconds = time.monotonic() - started
            self.rows.append((title, seconds, outcome))
            style = "green" if outcome == "ok" else "red"
            self.console.print(Text.assemble((outcome, style), f" in {seconds:.1f} s"))

    def outcome_of(self, title: str) -> str | None:
        return next((outcome for name, _, outcome in self.rows if name == title), None)

    @property
    def is_ok(self) -> bool:
        return len(self.rows) == self.total and all(outcome == "ok" for _, _, outcome in self.rows)

    def table(self, setup_s: float | None = None) -> Table:
        """Seconds per phase, and the install time scripts/quickstart.sh measured, if given."""
        table = Table(title="quickstart timings", title_justify="left")
        table.add_column("phase")
        table.add_column("seconds", justify="right")
        table.add_column("result")
        rows = list(self.rows)
        if setup_s is not None:
            rows.insert(0, ("install (scripts/quickstart.sh: .venv + vLLM env)", setup_s, "ok"))
        for title, seconds, outcome in rows:
            table.add_row(title, f"{seconds:.1f}", outcome)
        table.add_row("total", f"{sum(seconds for _, seconds, _ in rows):.1f}", "", style="bold")
        return table


_COLLECT = "collect scored rollouts (the collector)"


@dataclass
class _Started:
    """What is running, for the clean-up to stop."""

    stack: Stack | None = None
    log: FileSink | None = None
    signals: StopSignals = field(default_factory=StopSignals)

    def check_signals(self) -> None:
        """A Ctrl-C or SIGTERM seen since the last check ends the phase under way as interrupted."""
        if self.signals.requested():
            raise KeyboardInterrupt


def run_quickstart(plan: QuickstartPlan, *, console: Console, setup_s: float | None = None) -> int:
    """Run every phase, stop everything, print the report: 0 if all went well, 130 on Ctrl-C, else 1."""
    phases = Phases(console, total=_PHASE_COUNT)
    started = _Started()
    is_interrupted = False
    _prepare_run_dir(plan)
    with started.signals, _own_env_file(plan.env_file):
        try:
            _run_phases(plan, phases, started)
        except NgError as error:
            if started.signals.requested():  # a signal during start-up: a clean stop, not a failure
                is_interrupted = True
            else:
                _print_error(console, error)
        except KeyboardInterrupt:
            is_interrupted = True
        finally:
            if is_interrupted:
                console.print(Text("interrupted: stopping everything", style="yellow"))
            try:
                with phases.phase("stop the stack and its engine", is_last=True):
                    _stop_all(plan, started)
            except NgError as error:
                _print_error(console, error)
    _report(plan, phases, console, setup_s, is_interrupted=is_interrupted)
    if is_interrupted:
        return EXIT_INTERRUPTED
    return 0 if phases.is_ok else 1


def _prepare_run_dir(plan: QuickstartPlan) -> None:
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    plan.run_dir.chmod(0o700)  # it holds the env file with the run's key
    write_env_file(plan.env_file)


@contextlib.contextmanager
def _own_env_file(path: Path) -> Iterator[None]:
    """The config, the servers and the engine read the run's own env file, not the user's."""
    previous = os.environ.get(ENV_YAML_ENV)
    os.environ[ENV_YAML_ENV] = str(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(ENV_YAML_ENV, None)
        else:
            os.environ[ENV_YAML_ENV] = previous


def _run_phases(plan: QuickstartPlan, phases: Phases, started: _Started) -> None:
    """The three working phases; `started` tells the clean-up what to stop."""
    show = phases.console
    with phases.phase("check the embedded model"):
        _check_model_dir(plan.model_dir)
        note = "trained offline for this task; see its README.md"
        show.print(f"model: {plan.model_dir} ({note})", highlight=False, soft_wrap=True)
    with phases.phase("start the CPU vLLM engine and the example stack"):
        config = compose_config([*stack_overrides(plan), *collect_overrides(plan)], cwd=plan.root)
        settings = collect_config_from(config)  # a bad option fails here, before anything starts
        show.print(
            f"the stack's output (the engine's too): {plan.ng_run_log}", highlight=False, soft_wrap=True
        )
        stack = _start_stack(plan, started, config)
        for engine in stack.engines.rows():
            line = f"engine: {engine['name']} {engine['url']} ({engine['reported']})"
            show.print(line, highlight=False, soft_wrap=True)
        show.print(f"head server: {stack.plan.head.url}", highlight=False, soft_wrap=True)
    with phases.phase(_COLLECT):
        result = collect_on_stack(stack, settings, show, should_stop=started.signals.requested)
        started.check_signals()
        assert result is not None  # None only when a stop was asked for
        show.print(render_summary(result))
        if result.exit_code != 0:
            failures = OutputPaths.for_output(plan.output).failures
            raise LaunchError(
                f"the collector ended with code {result.exit_code}",
                hint=f"failed rollouts are listed in {failures}, the stack's output is in {plan.ng_run_log}",
            )


MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def _check_model_dir(model_dir: Path) -> None:
    """Fail before the 15 s engine start when the committed model is not all there."""
    missing = [name for name in MODEL_FILES if not (model_dir / name).is_file()]
    if missing:
        raise LaunchError(
            f"the embedded model in {model_dir} lacks {', '.join(missing)}",
            hint="restore it with `git checkout -- models/tiny-weather`, or retrain it with "
            "`bash scripts/train_embedded_model.sh` (about 11 min on 2 cores)",
        )


def _start_stack(plan: QuickstartPlan, started: _Started, config: ComposedConfig) -> Stack:
    """Plan, start and wait for the stack (engine first); its output goes to the log file."""
    stack_plan, backend = plan_and_connect(config)
    plan.ng_run_log.unlink(missing_ok=True)  # this run's lines only
    started.log = FileSink(plan.ng_run_log)
    started.stack = stack = Stack.start(stack_plan, sink=started.log, backend=backend)
    stack.wait_ready(should_stop=started.signals.requested)
    started.check_signals()
    return stack


def _stop_all(plan: QuickstartPlan, started: _Started) -> None:
    """The stack stops its servers and its engine (SIGTERM, then SIGKILL after the grace period)."""
    try:
        if started.stack is not None:
            started.stack.stop(hurry=started.signals.hurried)
    finally:
        if started.log is not None:
            started.log.close()
        plan.env_file.unlink(missing_ok=True)


def _report(
    plan: QuickstartPlan, phases: Phases, console: Console, setup_s: float | None, *, is_interrupted: bool
) -> None:
    console.print(phases.table(setup_s))
    if phases.outcome_of(_COLLECT) == "ok":
        console.print(rollout_report(plan.output))
    if phases.is_ok:
        console.print(Text("quickstart done", style="bold green"))
    elif is_interrupted:
        console.print(Text("quickstart interrupted; everything it started is stopped", style="bold yellow"))
    else:
        console.print(Text(f"quickstart failed; logs are in {plan.run_dir}", style="bold red"))


def _print_error(console: Console, error: NgError) -> None:
    console.print(Text.assemble(("error: ", "bold red"), error.message))
    if error.hint:
        console.print(Text.assemble(("hint: ", "bold yellow"), error.hint))
