"""NeMo Gym's `dispatch_budget_s`: stop starting rollouts once a time budget is spent.

A batch job (a Slurm allocation) has a walltime; a rollout started just before it ends is killed
part-way and its work lost. With a budget, a rollout is started only while time is left, and not
when less is left than the margin: `drain_margin_s`, else (NeMo Gym 0.7.0's
`DispatchLatencyTracker.drain_margin`) the p75 of this run's rollout durations once 5 finished.
A rollout not started writes nothing, neither a row nor a failure, so running the same command
again (a resume) starts it.
"""

from __future__ import annotations

import bisect
import time

__all__ = ["DispatchBudget"]

_MIN_DURATIONS = 5
_MARGIN_QUANTILE = 0.75


class DispatchBudget:
    """The deadline for starting rollouts, and the durations that size the margin before it."""

    def __init__(self, budget_s: float, *, margin_s: float | None = None) -> None:
        self.deadline = time.monotonic() + budget_s
        self.margin_s = margin_s
        self.drained = 0
        """Rollouts not started because the budget was spent."""
        self._durations: list[float] = []

    def record(self, duration_s: float) -> None:
        """One rollout's wall time (a successful attempt's), for the adaptive margin."""
        if duration_s > 0:
            bisect.insort(self._durations, duration_s)

    def margin(self) -> float | None:
        """The headroom a rollout needs to be worth starting: the configured one, else the p75."""
        if self.margin_s is not None:
            return self.margin_s
        if len(self._durations) < _MIN_DURATIONS:
            return None
        return _quantile(self._durations, _MARGIN_QUANTILE)

    def allows_start(self) -> bool:
        """Whether a rollout may start now; a refusal is counted in `drained`."""
        remaining = self.deadline - time.monotonic()
        margin = self.margin()
        if remaining <= 0 or (margin is not None and remaining < margin):
            self.drained += 1
            return False
        return True


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between ranks, as NeMo Gym's tracker computes it."""
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] * (1 - (position - low)) + ordered[high] * (position - low)
