"""Live progress: counters of this run, and how they are shown while it goes.

On a terminal, a rich live panel (bar, rates, mean reward, failures by class, ETA) redrawn twice a
second from the event loop; elsewhere (CI, a log file), one compact line every few seconds.
Rates count this run only, so a resumed run shows its own speed; done/total and the mean reward
include the rows an earlier run already wrote.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from ng_cli.rollouts.failures import Failure

__all__ = ["LineView", "LiveView", "NullView", "ProgressView", "RunStats", "Snapshot", "make_view"]


@dataclass
class RunStats:
    """Counters of this run, updated by the workers (one event loop, so no locks)."""

    total: int
    already_done: int
    started_s: float = field(default_factory=time.monotonic)
    succeeded: int = 0
    failed: int = 0
    attempts: int = 0
    retried: int = 0
    """Rollouts attempted more than once, whatever their end (a retry is a retry)."""
    recovered: int = 0
    """Of those, the ones that succeeded in the end."""
    output_tokens: int = 0
    in_flight: int = 0
    drained: int = 0
    """Rollouts not started because dispatch_budget_s was spent (no row, no failure)."""
    failures: Counter[str] = field(default_factory=Counter)
    """Rollouts that failed for good, by kind."""
    attempt_failures: Counter[str] = field(default_factory=Counter)
    """Every failed attempt (retried or not), by kind."""
    upstream_down_since: float | None = None
    """Monotonic time the model's upstream went down, as the last open-circuit answer said."""

    def attempt_failed(self, failure: Failure) -> None:
        self.attempt_failures[failure.kind.value] += 1
        if failure.upstream_down_s is not None:
            self.upstream_down_since = time.monotonic() - failure.upstream_down_s

    def rollout_failed(self, failure: Failure) -> None:
        self.failed += 1
        self.failures[failure.kind.value] += 1
        self.retried += failure.attempt > 1

    def rollout_succeeded(self, *, attempts: int, output_tokens: int) -> None:
        self.succeeded += 1
        self.upstream_down_since = None  # a rollout got through: the upstream is back
        self.retried += attempts > 1
        self.recovered += attempts > 1
        self.output_tokens += output_tokens

    @property
    def elapsed_s(self) -> float:
        return max(time.monotonic() - self.started_s, 1e-9)

    def snapshot(self, mean_reward: float | None) -> Snapshot:
        finished = self.succeeded + self.failed
        rate = finished / self.elapsed_s
        remaining = self.total - self.already_done - finished
        return Snapshot(
            done=self.already_done + self.succeeded,
            failed=self.failed,
            total=self.total,
            rollouts_per_s=self.succeeded / self.elapsed_s,
            tokens_per_s=self.output_tokens / self.elapsed_s,
            mean_reward=mean_reward,
            failures=dict(self.failures),
            retries=sum(self.attempt_failures.values()) - self.failed,
            in_flight=self.in_flight,
            eta_s=remaining / rate if rate > 0 else None,
            elapsed_s=self.elapsed_s,
            upstream_down_s=None
            if self.upstream_down_since is None
            else time.monotonic() - self.upstream_down_since,
        )


@dataclass(frozen=True)
class Snapshot:
    """What a view shows at one moment."""

    done: int
    failed: int
    total: int
    rollouts_per_s: float
    tokens_per_s: float
    mean_reward: float | None
    failures: dict[str, int]
    retries: int
    in_flight: int
    eta_s: float | None
    elapsed_s: float
    upstream_down_s: float | None = None
    """Set while model servers answer that their upstream is down: for how long."""

    @property
    def upstream_note(self) -> str:
        """` | upstream down for 37 s` while it is, else empty."""
        if self.upstream_down_s is None:
            return ""
        return f" | upstream down for {self.upstream_down_s:.0f} s"

    def line(self) -> str:
        """The compact one-line form (non-TTY progress, and the live panel's status line)."""
        reward = "-" if self.mean_reward is None else f"{self.mean_reward:.3f}"
        failures = ", ".join(f"{kind} {n}" for kind, n in sorted(self.failures.items())) or "none"
        return (
            f"{self.done}/{self.total} done, {self.failed} failed ({failures}), {self.retries} retries | "
            f"{self.rollouts_per_s:.1f} rollouts/s, {self.tokens_per_s:.0f} tok/s | mean reward {reward} | "
            f"in flight {self.in_flight} | ETA {_duration(self.eta_s)}{self.upstream_note}"
        )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressView(Protocol):
    """Something that shows snapshots; `update` is called about twice a second."""

    def start(self) -> None: ...
    def update(self, snapshot: Snapshot) -> None: ...
    def stop(self, snapshot: Snapshot) -> None: ...


class NullView:
    """Shows nothing (library use, tests)."""

    def start(self) -> None:
        pass

    def update(self, snapshot: Snapshot) -> None:
        pass

    def stop(self, snapshot: Snapshot) -> None:
        pass


class LineView:
    """One line every `interval_s` seconds, and one at the end: readable in CI logs."""

    def __init__(self, console: Console, *, interval_s: float) -> None:
        self.console = console
        self.interval_s = interval_s
        self._last_s = time.monotonic()

    def start(self) -> None:
        self._last_s = time.monotonic()

    def update(self, snapshot: Snapshot) -> None:
        if time.monotonic() - self._last_s >= self.interval_s:
            self._last_s = time.monotonic()
            self.console.print(
                f"[{_duration(snapshot.elapsed_s)}] {snapshot.line()}", highlight=False, soft_wrap=True
            )

    def stop(self, snapshot: Snapshot) -> None:
        self.console.print(
            f"[{_duration(snapshot.elapsed_s)}] {snapshot.line()}", highlight=False, soft_wrap=True
        )


class LiveView:
    """A rich live panel: a progress bar plus the rates and failure counts under it."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress = Progress(
            TextColumn("[bold]rollouts"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rates]}"),
            TimeElapsedColumn(),
            TextColumn("ETA {task.fields[eta]}"),
            console=console,
        )
        self._task = self._progress.add_task("rollouts", total=None, rates="", eta="?")
        self._status = Text()
        self._live = Live(
            Group(self._progress, self._status), console=console, auto_refresh=False, transient=False
        )

    def start(self) -> None:
        self._live.start()

    def update(self, snapshot: Snapshot) -> None:
        rates = f"{snapshot.rollouts_per_s:.1f}/s  {snapshot.tokens_per_s:.0f} tok/s"
        self._progress.update(
            self._task,
            total=snapshot.total,
            completed=snapshot.done,
            rates=rates,
            eta=_duration(snapshot.eta_s),
        )
        reward = "-" if snapshot.mean_reward is None else f"{snapshot.mean_reward:.3f}"
        failures = ", ".join(f"{kind} {n}" for kind, n in sorted(snapshot.failures.items())) or "none"
        self._status.plain = (
            f"mean reward {reward}   failed {snapshot.failed} ({failures})   retries {snapshot.retries}   "
            f"in flight {snapshot.in_flight}{snapshot.upstream_note}"
        )
        self._live.refresh()

    def stop(self, snapshot: Snapshot) -> None:
        self.update(snapshot)
        self._live.stop()


def make_view(console: Console, *, interval_s: float) -> ProgressView:
    """The live panel on a terminal, compact lines otherwise."""
    if console.is_terminal and not console.is_dumb_terminal:
        return LiveView(console)
    return LineView(console, interval_s=interval_s)
