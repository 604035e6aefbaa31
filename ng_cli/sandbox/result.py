"""`ExecutionResult`: what one sandboxed run produced, and how it ended."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Literal

__all__ = ["ExecutionResult", "Outcome", "classify"]

Outcome = Literal["ok", "runtime_error", "timeout", "cpu_limit", "memory_limit", "output_limit", "killed"]
"""`ok`: exit status 0. `runtime_error`: non-zero exit (an exception, MemoryError included).
`timeout`: the wall clock ran out. `cpu_limit`: RLIMIT_CPU. `memory_limit`: the OOM killer ended
the program, the run's processes together holding `memory_mb` (its cgroup). `output_limit`: too
much output. `killed`: ended by another signal (e.g. SIGSEGV)."""


@dataclass(frozen=True)
class ExecutionResult:
    """The program's output (decoded as UTF-8, invalid bytes replaced) and how it ended."""

    outcome: Outcome
    stdout: str
    stderr: str
    exit_code: int | None
    """The exit status, or None when a signal ended the program."""
    signal: int | None
    """The signal that ended the program, if one did."""
    cpu_s: float
    wall_s: float
    isolated: bool
    """False only when `allow_unisolated` let it run without namespaces."""
    memory_peak_bytes: int | None = None
    """The most memory the run's processes held at once (its cgroup's peak); None without one."""

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


def classify(
    *,
    exit_code: int | None,
    signal_number: int | None,
    cpu_s: float,
    cpu_limit_s: int,
    timed_out: bool,
    output_truncated: bool,
    oom_killed: bool = False,
) -> Outcome:
    """The outcome of a run; limits we enforced come first, since they explain the signal."""
    if output_truncated:
        return "output_limit"
    if timed_out:
        return "timeout"
    if oom_killed and signal_number == signal.SIGKILL:  # the run's cgroup counted the kill
        return "memory_limit"
    # The kernel's RLIMIT_CPU clock is exact, but wait4's rusage under-reports it (by ~15% for a
    # fork-heavy program), so a SIGKILL we did not send counts as the CPU limit near the limit.
    if signal_number in (signal.SIGXCPU, signal.SIGKILL) and cpu_s >= 0.75 * cpu_limit_s:
        return "cpu_limit"
    if signal_number is not None:
        return "killed"
    return "ok" if exit_code == 0 else "runtime_error"
