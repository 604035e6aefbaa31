"""Running the quickstart: each phase with a header and a timing, and everything stopped at the end.

    embedded model -> ng_run (local_vllm_model: its CPU engine first, then the servers; ready file)
                   -> ng_collect_rollouts -> stop

Whatever happens (a failed phase, Ctrl-C, SIGTERM), the last phase stops `ng_run` (SIGINT, as
Ctrl-C would), which stops its engine and servers. A second Ctrl-C is ignored while that runs,
so it cannot leave an engine behind.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from ng_cli.errors import LaunchError, NgError
from ng_cli.quickstart.plan import QuickstartPlan, child_env, collect_args, ng_run_args, write_env_file
from ng_cli.quickstart.processes import StackProcess, console_script, run_foreground
from ng_cli.quickstart.report import rollout_report
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


_COLLECT = "collect scored rollouts (ng_collect_rollouts)"


@dataclass
class _Started:
    """What is running, for the clean-up to stop."""

    stack: StackProcess | None = None


def run_quickstart(plan: QuickstartPlan, *, console: Console, setup_s: float | None = None) -> int:
    """Run every phase, stop everything, print the report: 0 if all went well, 130 on Ctrl-C, else 1."""
    phases = Phases(console, total=_PHASE_COUNT)
    started = _Started()
    is_interrupted = False
    _prepare_run_dir(plan)
    try:
        with _sigterm_as_interrupt():
            _run_phases(plan, phases, started)
    except NgError as error:
        _print_error(console, error)
    except KeyboardInterrupt:
        console.print(Text("interrupted: stopping everything", style="yellow"))
        is_interrupted = True
    finally:
        with _sigint_ignored():
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


def _run_phases(plan: QuickstartPlan, phases: Phases, started: _Started) -> None:
    """The three working phases; `started` tells the clean-up what to stop."""
    show = phases.console
    with phases.phase("check the embedded model"):
        _check_model_dir(plan.model_dir)
        note = "trained offline for this task; see its README.md"
        show.print(f"model: {plan.model_dir} ({note})", highlight=False, soft_wrap=True)
    with phases.phase("start the CPU vLLM engine and the example stack (ng_run)"):
        show.print(f"ng_run's output (the engine's too): {plan.ng_run_log}", highlight=False, soft_wrap=True)
        started.stack = stack = _start_stack(plan)
        for engine in stack.ready.get("engines", []):
            show.print(f"engine: {engine['url']} ({engine['reported']})", highlight=False, soft_wrap=True)
        show.print(f"head server: {stack.head_url}", highlight=False, soft_wrap=True)
    with phases.phase(_COLLECT):
        _collect(plan, stack)


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


def _start_stack(plan: QuickstartPlan) -> StackProcess:
    return StackProcess.start(
        [str(console_script("ng_run")), *ng_run_args(plan)],
        env=child_env(plan, is_logged=True),
        cwd=plan.root,
        ready_file=plan.ready_file,
        log_path=plan.ng_run_log,
        timeout_s=plan.ready_timeout_s,
    )


def _collect(plan: QuickstartPlan, stack: StackProcess) -> None:
    command = [str(console_script("ng_collect_rollouts")), *collect_args(plan, stack.head_url)]
    code = run_foreground(command, env=child_env(plan), cwd=plan.root, timeout_s=plan.collect_timeout_s)
    if code != 0:
        failures = OutputPaths.for_output(plan.output).failures
        raise LaunchError(
            f"ng_collect_rollouts exited with code {code}",
            hint=f"its output is above; failed rollouts are listed in {failures}, ng_run's output in {stack.log_path}",
        )


def _stop_all(plan: QuickstartPlan, started: _Started) -> None:
    """ng_run stops its servers and its engine; whatever outlives it is killed and reported."""
    try:
        problems = started.stack.stop() if started.stack is not None else []
    finally:
        plan.env_file.unlink(missing_ok=True)
    if problems:
        raise LaunchError("; ".join(problems))


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


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so the clean-up still runs."""

    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
