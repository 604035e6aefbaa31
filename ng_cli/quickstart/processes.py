"""The console scripts the quickstart runs: `ng_run` in the background, the collector in the foreground.

`ng_run` gets its own session, so a Ctrl-C typed at the terminal reaches only the quickstart,
which then stops the stack in order (SIGINT to `ng_run`, which stops its servers). The
collector stays in the terminal's process group: it sees the Ctrl-C itself and, being
resumable, stops cleanly. A stack that does not stop in time is killed, servers included,
using the pids its ready file lists, so no process outlives the quickstart.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ng_cli.errors import LaunchError

__all__ = ["StackProcess", "console_script", "run_foreground"]

LOG_TAIL_LINES = 50
STOP_TIMEOUT_S = 10.0
"""ng_run stops its servers within 5 s of a signal; twice that before it is killed."""
_INTERRUPTED_EXIT = 130


def console_script(name: str) -> Path:
    """The project's console script `name`, beside this interpreter (the venv) or on PATH."""
    beside = Path(sys.executable).with_name(name)
    if beside.is_file():
        return beside
    found = shutil.which(name)
    if found is None:
        raise LaunchError(
            f"the console script {name!r} is not installed next to {sys.executable} nor on PATH",
            hint="install the project into its venv: .venv/bin/python -m pip install -e .",
        )
    return Path(found)


def run_foreground(command: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout_s: float) -> int:
    """Run `command` with this terminal's stdio; return its exit code.

    On Ctrl-C the child got the SIGINT too (same process group); on SIGTERM or a timeout it did
    not, so it gets one. Either way it has time to finish its last writes before a SIGKILL.
    """
    with _sigint_receivable():
        process = subprocess.Popen(list(command), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _interrupt(process)
        raise LaunchError(
            f"{Path(command[0]).name} did not finish within {timeout_s:.0f} s; it was stopped",
            hint="the rollouts written so far are kept; rerun the collector without +overwrite=true to resume",
        ) from None
    except BaseException:
        _interrupt(process, first_wait_s=2.0)
        raise


@contextlib.contextmanager
def _sigint_receivable() -> Iterator[None]:
    """Spawn with SIGINT not ignored, so the child can be stopped by the SIGINT we send it.

    An ignored SIGINT (we run under `nohup`, or as `cmd &` from a script) stays ignored across
    exec, and a Python child then never raises KeyboardInterrupt; a handled one is reset to the
    default at exec. So for the spawn, a no-op handler stands in for SIG_IGN.
    """
    if (
        signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    signal.signal(signal.SIGINT, lambda _signum, _frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupt(process: subprocess.Popen[bytes], *, first_wait_s: float = 0.0) -> None:
    """SIGINT unless it ends within `first_wait_s` (it may have had one already), then SIGKILL."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=first_wait_s)
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    _wait_or_kill(process, STOP_TIMEOUT_S)


class StackProcess:
    """One `ng_run` subprocess: its log file, and the stack its ready file describes."""

    def __init__(self, process: subprocess.Popen[bytes], *, log_path: Path, ready_file: Path) -> None:
        self.process = process
        self.log_path = log_path
        self.ready_file = ready_file
        self.ready: dict[str, Any] = {}
        self._stop_problems: list[str] | None = None

    @classmethod
    def start(
        cls,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        ready_file: Path,
        log_path: Path,
        timeout_s: float,
    ) -> StackProcess:
        """Start `ng_run` and return once its ready file exists; LaunchError with its log tail if not."""
        ready_file.unlink(missing_ok=True)  # a stale one from a killed run would read as ready
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                list(command),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        stack = cls(process, log_path=log_path, ready_file=ready_file)
        try:
            stack.wait_ready(timeout_s)
        except BaseException:
            stack.stop()
            raise
        return stack

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def head_url(self) -> str:
        return str(self.ready["head_url"])

    @property
    def server_pids(self) -> dict[str, int]:
        """Server and engine name -> pid, from the ready file (empty before it was read)."""
        children = [*self.ready.get("engines", []), *self.ready.get("servers", [])]
        return {child["name"]: int(child["pid"]) for child in children if child.get("pid")}

    def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        """Poll for the ready file; raise LaunchError if ng_run exits first or the deadline passes."""
        deadline = time.monotonic() + timeout_s
        while not self.ready_file.is_file():
            code = self.process.poll()
            if code is not None:
                raise LaunchError(
                    f"ng_run exited with code {code} before the stack was ready\n{self.log_tail()}",
                    hint=f"its whole output is in {self.log_path}",
                )
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"the stack was not ready within {timeout_s:.0f} s\n{self.log_tail()}",
                    hint=f"its whole output is in {self.log_path}",
                )
            time.sleep(0.1)
        self.ready = json.loads(self.ready_file.read_text())
        return self.ready

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        with self.log_path.open(errors="replace") as log:
            return f"--- last {lines} lines of {self.log_path} ---\n" + "".join(deque(log, maxlen=lines))

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
        """SIGINT (Ctrl-C) and wait; kill what is left. Returns what went wrong (empty: clean).

        Idempotent: a second call returns the first call's findings.
        """
        if self._stop_problems is not None:
            return self._stop_problems
        problems: list[str] = []
        code = self.process.poll()
        if code is not None:
            problems.append(f"ng_run had already exited with code {code}; see {self.log_path}")
        else:
            self.process.send_signal(signal.SIGINT)
            code = _wait_or_kill(self.process, timeout_s)
            if code != _INTERRUPTED_EXIT:
                problems.append(
                    f"ng_run exited with code {code} after SIGINT (expected 130); see {self.log_path}"
                )
        problems.extend(self._kill_leftover_servers())
        self._stop_problems = problems
        return problems

    def _kill_leftover_servers(self) -> list[str]:
        """Normally none: ng_run stops its servers. Their group also holds what they started."""
        leftovers = {name: pid for name, pid in self.server_pids.items() if _is_running(pid)}
        for pid in leftovers.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
        deadline = time.monotonic() + 2.0  # SIGKILL is delivered asynchronously
        while any(_is_running(pid) for pid in leftovers.values()) and time.monotonic() < deadline:
            time.sleep(0.02)
        return [f"server {name!r} (pid {pid}) outlived ng_run; killed it" for name, pid in leftovers.items()]


def _wait_or_kill(process: subprocess.Popen[bytes], timeout_s: float) -> int:
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def _is_running(pid: int) -> bool:
    """Whether `pid` is a live process (not a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
