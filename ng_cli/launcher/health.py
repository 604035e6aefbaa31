"""Readiness of ng_run's servers: every server's `GET /health`, against one deadline.

Because the launcher binds each socket before spawn, a probe's connection is accepted by the
kernel at once and its request simply waits in the backlog until the child serves: the answer
arrives the moment the child is ready. One thread per server, each polling through
`servers.readiness.poll_until`; a child that exits before it is ready fails the wait at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from ng_cli.errors import LaunchError
from ng_cli.servers.readiness import poll_until, probe_health

__all__ = [
    "ExitedBeforeReadyError",
    "NotReadyError",
    "Target",
    "probe_all",
    "wait_until_ready",
]

_PROBE_TIMEOUT_S = 0.25
"""One probe waits at most this long, so a death or a stop request is noticed promptly."""


@dataclass(frozen=True)
class Target:
    """A server to wait for: its name, base URL, and how to learn that its process ended."""

    name: str
    url: str
    exit_code: Callable[[], int | None]


class NotReadyError(LaunchError):
    """A server did not answer `/health` before the deadline."""

    def __init__(self, message: str, *, name: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.name = name


class ExitedBeforeReadyError(NotReadyError):
    """A server's process ended before it answered `/health`."""

    def __init__(self, message: str, *, name: str, exit_code: int) -> None:
        super().__init__(message, name=name)
        self.exit_code = exit_code


def probe_all(urls: Mapping[str, str], *, timeout_s: float) -> dict[str, bool]:
    """Probe every `<url>/health` at once; name -> answered 200 within `timeout_s`."""
    if not urls:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(urls)), thread_name_prefix="probe") as pool:
        answers = {name: pool.submit(probe_health, url, timeout_s=timeout_s) for name, url in urls.items()}
        return {name: answer.result() for name, answer in answers.items()}


def wait_until_ready(
    targets: Mapping[str, Target],
    *,
    timeout_s: float,
    should_stop: Callable[[], bool] = lambda: False,
    on_ready: Callable[[str, float], None] | None = None,
) -> dict[str, float]:
    """Seconds until each target answered `/health`; raises NotReadyError for the first failure.

    `should_stop` lets a signal handler abandon the wait (then a LaunchError says so).
    """
    started = time.monotonic()
    deadline = started + timeout_s
    cancelled = threading.Event()
    ready: dict[str, float] = {}
    with ThreadPoolExecutor(max_workers=max(1, len(targets)), thread_name_prefix="health") as pool:
        futures: dict[Future[float], str] = {
            pool.submit(_wait_one, target, started, deadline, cancelled): name
            for name, target in targets.items()
        }
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=0.05, return_when=FIRST_EXCEPTION)
                for future in done:
                    ready[futures[future]] = future.result()  # raises the target's failure
                    if on_ready is not None:
                        on_ready(futures[future], ready[futures[future]])
                if pending and should_stop():
                    raise LaunchError("start-up interrupted before every server was ready")
        finally:
            cancelled.set()
    return ready


def _wait_one(target: Target, started: float, deadline: float, cancelled: threading.Event) -> float:
    def exited() -> None:
        code = target.exit_code()
        if code is not None:
            raise ExitedBeforeReadyError(
                f"'{target.name}' exited before it was ready", name=target.name, exit_code=code
            )

    def answers() -> bool:
        return probe_health(
            target.url, timeout_s=max(0.001, min(_PROBE_TIMEOUT_S, deadline - time.monotonic()))
        )

    ready = poll_until(answers, timeout_s=deadline - time.monotonic(), check=exited, cancelled=cancelled)
    if not ready and not cancelled.is_set():
        raise NotReadyError(
            f"'{target.name}' did not answer {target.url}/health within {deadline - started:.0f} s",
            name=target.name,
            hint="raise the deadline with +ready_timeout_s=<seconds> if it is just slow to start",
        )
    return time.monotonic() - started
