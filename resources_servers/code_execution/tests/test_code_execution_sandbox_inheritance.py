"""A sandboxed program inherits nothing of the server: no descriptor, no signal disposition or mask.

Each test plants what a server may hold (an inheritable listening socket, as ng_run hands its
children; an ignored or blocked signal, as under nohup), shows with a control run outside the
sandbox that a child would inherit it, then runs the same probe in the sandbox under both event
loops: the standard one, and uvloop, which uvicorn uses in production and whose
`create_subprocess_exec` ignores `close_fds` (issue 24).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from ng_cli.sandbox import ExecutionResult, PythonSandbox, SandboxConfig

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        sys.platform != "linux" or os.geteuid() != 0,
        reason="the sandbox needs Linux and root (namespaces, mounts, setuid)",
    ),
    pytest.mark.skipif(not Path("/usr/bin/python3").is_file(), reason="the controls need /usr/bin/python3"),
]

UID_BASE = 100_000 + secrets.randbelow(100_000) * 8
SYSTEM_PYTHON = "/usr/bin/python3"
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def run_sandboxed(loop: str, code: str, **overrides: Any) -> ExecutionResult:
    """One run in a fresh sandbox on a fresh event loop of the given kind."""
    settings: dict[str, Any] = {"uid_base": UID_BASE, "max_concurrency": 2, **overrides}
    sandbox = PythonSandbox(SandboxConfig(**settings))
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(sandbox.run(code))


def run_unsandboxed(code: str) -> str:
    """The control: a plain child as the sandbox's uid, keeping whatever is inheritable."""
    completed = subprocess.run(
        [SYSTEM_PYTHON, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        user=UID_BASE,
        close_fds=False,
        check=True,
    )
    return completed.stdout


PROBE_FDS = """
import json, os
found = []
for fd in range(3, 65537):
    try:
        os.fstat(fd)
        found.append(fd)
    except OSError:
        pass
print(json.dumps(found))
"""


@pytest.fixture
def planted_fds() -> Iterator[list[int]]:
    """Inheritable descriptors in the server: a listening socket (ng_run's children get theirs this
    way), its copies above the sandbox's RLIMIT_NOFILE and near the server's own, and a file."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.set_inheritable(True)
    highest = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 1
    copies = [os.dup2(listener.fileno(), fd) for fd in (100, min(highest, 65536))]  # inheritable
    file_fd = os.open(__file__, os.O_RDONLY)
    os.set_inheritable(file_fd, True)
    planted = [listener.fileno(), *copies, file_fd]
    try:
        yield planted
    finally:
        for fd in planted[1:]:
            os.close(fd)
        listener.close()


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_the_program_holds_no_descriptor_of_the_server(loop: str, planted_fds: list[int]) -> None:
    assert set(planted_fds) <= set(json.loads(run_unsandboxed(PROBE_FDS)))  # the control

    result = run_sandboxed(loop, PROBE_FDS)
    assert result.outcome == "ok", result.stderr
    assert json.loads(result.stdout) == []


PROBE_SIGNALS = """
import json, signal
ignored = [s for s in signal.valid_signals() if signal.getsignal(s) == signal.SIG_IGN]
blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
print(json.dumps({"ignored": sorted(map(int, ignored)), "blocked": sorted(map(int, blocked))}))
"""
PYTHON_IGNORES = [int(signal.SIGPIPE), int(signal.SIGXFSZ)]
"""Every Python program ignores these itself, at start-up."""


@pytest.fixture
def odd_signal_state() -> Iterator[tuple[set[int], set[int]]]:
    """An ignored SIGHUP (nohup), SIGUSR1 and real-time signal, and a blocked SIGUSR2, in this thread
    (the event loop's, which spawns the bootstrap)."""
    ignored = {int(signal.SIGHUP), int(signal.SIGUSR1), signal.SIGRTMIN + 3}
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in ignored}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
    try:
        yield ignored, {int(signal.SIGUSR2)}
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_the_program_starts_with_default_signal_dispositions_and_mask(
    loop: str, odd_signal_state: tuple[set[int], set[int]]
) -> None:
    ignored, blocked = odd_signal_state
    control = json.loads(run_unsandboxed(PROBE_SIGNALS))
    assert ignored <= set(control["ignored"])
    assert blocked <= set(control["blocked"])

    result = run_sandboxed(loop, PROBE_SIGNALS)
    assert result.outcome == "ok", result.stderr
    assert json.loads(result.stdout) == {"ignored": PYTHON_IGNORES, "blocked": []}
