"""Child processes of `ng_run`: spawned in process groups, their output relayed and remembered.

A server is `sys.executable` (the one project environment), an engine the engine venv's
interpreter; each has stdin closed and stdout and stderr on one pipe. A thread per child relays
each line as `[name] line` and keeps the last lines in a ring buffer, so a crash can be reported
with what the child said before it died. The first server leads a new process group and the other
servers join it; each engine leads its own (`launcher/engines.py`). So one `killpg` per group
reaches every child and anything they started (workers, EngineCore), and a Ctrl-C typed at the
terminal reaches only `ng_run`, which then stops the groups in order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from rich.console import Console
from rich.text import Text

__all__ = [
    "LOG_TAIL_LINES",
    "Child",
    "ConsoleSink",
    "Handle",
    "LineSink",
    "describe_exit",
    "group_exists",
    "signal_groups",
    "spawn_child",
    "tail_text",
]

LOG_TAIL_LINES = 50
"""How many of a child's last output lines are kept for error reports."""

_HOSTNAME = socket.gethostname()

LineSink = Callable[[str, str], None]
"""Receives (child name, one line of its output without the newline)."""


class Handle(Protocol):
    """A running process as the launcher sees it: a local `Child`, or one a Ray actor owns."""

    name: str

    @property
    def pid(self) -> int: ...

    def exit_code(self) -> int | None: ...

    def last_lines(self) -> list[str]: ...

    def describe_end(self, code: int) -> str: ...

    def location(self) -> dict[str, Any]: ...

    def kill(self) -> None: ...

    def wait(self, timeout_s: float) -> None: ...


@dataclass
class Child:
    """One running child: its process, its group, and the tail of its output."""

    name: str
    process: subprocess.Popen[bytes]
    pgid: int
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_TAIL_LINES))
    relay: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def exit_code(self) -> int | None:
        """The exit status if the child has ended (negative = killed by that signal), else None."""
        return self.process.poll()

    def last_lines(self) -> list[str]:
        return list(self.tail)

    def describe_end(self, code: int) -> str:
        return describe_exit(code)

    def location(self) -> dict[str, Any]:
        """Where it runs: this machine (a Ray child names its node and actor)."""
        return {"node": _HOSTNAME, "actor": None}

    def kill(self) -> None:
        """SIGKILL its process group: it and everything it started (an engine leads its own group)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signal.SIGKILL)

    def wait(self, timeout_s: float) -> None:
        """Until it has ended and its output is read (or `timeout_s` passed)."""
        deadline = time.monotonic() + timeout_s
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=timeout_s)
        if self.relay is not None:
            self.relay.join(timeout=max(0.0, deadline - time.monotonic()))


class ConsoleSink:
    """Prints each child line as `[name] line` to stderr, one colour per child, markup-free."""

    _COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_cyan", "bright_magenta", "bright_green")

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self._styles: dict[str, str] = {}

    def __call__(self, name: str, line: str) -> None:
        style = self._styles.setdefault(name, self._COLOURS[len(self._styles) % len(self._COLOURS)])
        self.console.print(Text.assemble((f"[{name}] ", style), line))


def spawn_child(
    name: str,
    command: Sequence[str],
    *,
    pass_fds: Sequence[int] = (),
    pgid: int | None,
    sink: LineSink,
    env: dict[str, str] | None = None,
    redact: Callable[[str], str] | None = None,
) -> Child:
    """Start `command`; with `pgid=None` it leads a new process group, else it joins `pgid`.

    The group, not a new session: a child that joined another session could not be joined by
    its siblings (setpgid refuses cross-session groups), and staying in ng_run's session keeps
    the whole stack one job of the user's shell.
    """
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONUNBUFFERED"] = "1"  # lines reach the relay as they are written
    process = subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=tuple(pass_fds),
        close_fds=True,
        process_group=0 if pgid is None else pgid,
        env=child_env,
    )
    child = Child(name=name, process=process, pgid=process.pid if pgid is None else pgid)
    assert process.stdout is not None
    child.relay = threading.Thread(
        target=_relay_lines, args=(process.stdout, child, sink, redact), name=f"relay-{name}", daemon=True
    )
    child.relay.start()
    return child


def signal_groups(pgids: set[int], signum: int) -> set[int]:
    """Send `signum` to every group; returns the groups that still exist."""
    alive: set[int] = set()
    for pgid in pgids:
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            continue
        except PermissionError:  # the group id was reused by someone else's processes
            continue
        alive.add(pgid)
    return alive


def group_exists(pgid: int) -> bool:
    """True while any process (even a zombie) is still in the group."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def describe_exit(code: int) -> str:
    """`exit code 3`, or `exit code -9 (killed by SIGKILL)`: Popen reports signals as negatives."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"exit code {code} (killed by {name})"
    return f"exit code {code}"


def tail_text(name: str, child: Handle | None) -> str:
    """A child's last output lines, each prefixed with its name, for a death report."""
    lines = child.last_lines() if child is not None else []
    if not lines:
        return f"\n(no output from '{name}')"
    listing = "\n".join(f"  [{name}] {line}" for line in lines)
    return f"\nlast {len(lines)} lines of '{name}':\n{listing}"


def _relay_lines(
    stream: IO[bytes], child: Child, sink: LineSink, redact: Callable[[str], str] | None = None
) -> None:
    """Drain the child's pipe to the end, whatever the sink does: a full pipe would block the child.

    `redact` (the stack's secrets) runs before a line is kept or shown."""
    sink_works = True
    with stream:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if redact is not None:
                line = redact(line)
            child.tail.append(line)
            if sink_works:
                try:
                    sink(child.name, line)
                except (OSError, ValueError):  # our stderr is gone (closed pipe): keep draining
                    sink_works = False
