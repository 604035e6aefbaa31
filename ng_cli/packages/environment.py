"""The Python environment the servers run in: what is installed there, and pip to add to it.

Both run the target interpreter as a child (the one ng_run starts its servers with), so the
answer is that environment's and not the launcher's, and a test can point them at a scratch
virtual environment. Reading what is installed needs no network; only `pip_install` may, and it
is bounded in time and ends pip's whole process group on a stop, so no pip outlives ng_run.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import orjson
from packaging.utils import canonicalize_name

from ng_cli.errors import LaunchError
from ng_cli.packages.credentials import hide_credentials
from ng_cli.packages.resolve import Distribution

__all__ = ["PIP_TIMEOUT_S", "PROBE_TIMEOUT_S", "pip_install", "probe"]

PROBE_TIMEOUT_S = 60.0
PIP_TIMEOUT_S = 1800.0
"""The default bound on one pip run (ng_run's `+install_requirements_timeout_s`)."""
_STOP_GRACE_S = 3.0
"""How long pip's group has to end after SIGTERM before SIGKILL."""
_POLL_S = 0.1
_PROBE = """
import importlib.metadata as metadata, json, sys
found = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name and name not in found:  # the first on sys.path is the one imported
        found[name] = {"version": dist.version, "requires": list(dist.requires or [])}
json.dump(found, sys.stdout)
"""


def probe(python: str = sys.executable) -> dict[str, Distribution]:
    """Every distribution installed for `python`: canonical name -> version and requirements."""
    try:
        result = subprocess.run(
            [python, "-c", _PROBE], capture_output=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"could not ask {python} which packages it has: {exc}") from exc
    if result.returncode != 0:
        tail = result.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise LaunchError(f"could not ask {python} which packages it has:\n" + "\n".join(tail))
    found: dict[str, Distribution] = {}
    for name, entry in orjson.loads(result.stdout).items():
        found.setdefault(
            canonicalize_name(name), Distribution(str(entry["version"]), tuple(map(str, entry["requires"])))
        )
    return found


def pip_install(
    python: str,
    lines: Sequence[str],
    *,
    work_dir: Path,
    on_line: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    servers: Sequence[str] = (),
    timeout_s: float = PIP_TIMEOUT_S,
    should_stop: Callable[[], bool] = lambda: False,
) -> None:
    """`python -m pip install -r <lines>`; each output line (URL credentials hidden) goes to
    `on_line`. pip leads a process group of its own, which is ended (SIGTERM, then SIGKILL after
    a grace period) and waited for when pip runs past `timeout_s`, when `should_stop()` turns
    true (ng_run's SIGTERM or SIGINT), and also after pip exits (what it started and left
    behind). A failure, a timeout or a stop is a LaunchError with pip's last lines and the servers
    whose requirements were asked for."""
    requirements = work_dir / "requirements.txt"
    requirements.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    command = [python, "-m", "pip", "install", "--disable-pip-version-check", "-r", str(requirements)]
    asked = ", ".join(servers) or "the stack"
    if should_stop():
        raise LaunchError(f"stopped before pip ran for {asked}", hint="nothing was installed or started")
    tail: deque[str] = deque(maxlen=25)

    def relay(line: str) -> None:
        line = hide_credentials(line)
        tail.append(line)
        on_line(line)

    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            start_new_session=True,  # a group to end whole; a terminal's Ctrl-C reaches ng_run only
        )
    except OSError as exc:
        raise LaunchError(f"could not run pip with {python}: {exc}") from exc
    try:
        ended = _relay_until_exit(
            process, relay, deadline=time.monotonic() + timeout_s, should_stop=should_stop
        )
    finally:
        _end_group(process)
    last = "its last lines:\n" + "\n".join(tail)
    if ended == _STOPPED:
        raise LaunchError(f"pip was stopped (ng_run got a signal) while installing for {asked}; {last}")
    if ended == _TIMED_OUT:
        raise LaunchError(
            f"pip did not finish within {timeout_s:g} s installing for {asked}, and was stopped; {last}",
            hint="nothing was started; raise ng_run's +install_requirements_timeout_s, or install the "
            "requirements yourself and run again",
        )
    if process.returncode != 0:
        raise LaunchError(
            f"pip could not install the requirements of {asked} (exit code {process.returncode}); {last}",
            hint="nothing was started; fix the requirement, or install it yourself and run again "
            "(a met requirement needs no pip and no network)",
        )


_STOPPED = "stopped"
_TIMED_OUT = "timed out"


def _relay_until_exit(
    process: subprocess.Popen[bytes],
    relay: Callable[[str], None],
    *,
    deadline: float,
    should_stop: Callable[[], bool],
) -> str | None:
    """Relay pip's lines until it exits (None), `should_stop()` (_STOPPED) or the deadline
    (_TIMED_OUT). pip is not reaped here, so its group id stays its own until `_end_group`."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    pending = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            if should_stop():
                return _STOPPED
            left = deadline - time.monotonic()
            if left <= 0:
                return _TIMED_OUT
            # A signal's handler only sets the flag; the wait is short so the flag is seen soon.
            if selector.select(min(left, _POLL_S)):
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                *complete, pending = (pending + chunk).split(b"\n")
                for raw in complete:
                    relay(raw.decode(errors="replace").rstrip("\r"))
            elif _has_exited(process):
                break  # pip is gone; whatever still holds its output ends with its group
    if pending:
        relay(pending.decode(errors="replace").rstrip("\r"))
    return None


def _has_exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether pip exited, without reaping it (WNOWAIT): its pid, so its group id, stays pip's."""
    return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to pip's group, SIGKILL after the grace period, then SIGKILL to the group again for
    what pip started and left behind (a build backend), while pip (unreaped) still holds its id;
    then pip is reaped. Nothing of the group outlives this call but processes dying of SIGKILL."""
    if not _has_exited(process):
        _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_GRACE_S
        while not _has_exited(process) and time.monotonic() < deadline:
            time.sleep(_POLL_S / 2)
    _signal_group(process.pid, signal.SIGKILL)
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
