"""`memory_mb` bounds the whole run, not each process (issue 24, point 7).

RLIMIT_AS alone let a parent and 7 children reach 3.5 GB against `memory_mb: 512`. Here a
parent forks 4 children that each take 64 MiB, with `memory_mb: 128`: with the per-process
limits only (`cgroup: off`, the control) all four hold their block at once, 256 MiB; with the
run's cgroup at most one does, and the kernel's peak for the whole run stays within 128 MiB.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from typing import Any

import pytest

from ng_cli.sandbox import ExecutionResult, PythonSandbox, SandboxConfig
from ng_cli.sandbox.cgroups import find_cgroup_parent

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        sys.platform != "linux" or os.geteuid() != 0,
        reason="the sandbox needs Linux and root (namespaces, mounts, setuid)",
    ),
]

UID_BASE = 100_000 + secrets.randbelow(100_000) * 8
MIB = 1024 * 1024
MEMORY_MB = 128
CHILDREN, BLOCK_MB = 4, 64

PARENT_AND_CHILDREN = f"""
import json, os, select, signal, time

held_r, held_w = os.pipe()
alive_r, alive_w = os.pipe()
children = []
for _ in range({CHILDREN}):
    pid = os.fork()
    if pid == 0:
        os.close(held_r)
        os.close(alive_r)
        signal.signal(signal.SIGUSR1, lambda *_: os.write(alive_w, b"%d\\n" % os.getpid()))
        block = bytearray({BLOCK_MB} << 20)
        block[::4096] = b"x" * (len(block) // 4096)  # touch every page: resident, not just reserved
        os.write(held_w, b"%d\\n" % os.getpid())
        time.sleep(120)  # hold it until the run ends
        os._exit(0)
    children.append(pid)
os.close(held_w)
os.close(alive_w)

def reap(dead):
    for pid in set(children) - dead:
        if os.waitpid(pid, os.WNOHANG)[0]:
            dead.add(pid)

held, dead = set(), set()
while len(held | dead) < len(children):  # each child held its block, or died trying
    if select.select([held_r], [], [], 0.05)[0]:
        held.update(int(pid) for pid in os.read(held_r, 4096).split())
    reap(dead)
# A child the OOM killer chose may not be reaped yet when the next one reports: ask each one
# still counted to answer. A killed child never runs its handler; it is reaped instead.
alive = set()
for pid in held - dead:
    os.kill(pid, signal.SIGUSR1)
while (held - dead) - alive:
    if select.select([alive_r], [], [], 0.05)[0]:
        alive.update(int(pid) for pid in os.read(alive_r, 4096).split())
    reap(dead)
print(json.dumps({{"holding": len(alive - dead), "dead": len(dead)}}))
"""
"""Reports how many children hold their block at once: each one that held it and still answers."""


def run(code: str, **overrides: Any) -> ExecutionResult:
    settings: dict[str, Any] = {
        "uid_base": UID_BASE,
        "memory_mb": MEMORY_MB,
        "cpu_time_s": 10,
        "wall_time_s": 60.0,
        **overrides,
    }
    return asyncio.run(PythonSandbox(SandboxConfig(**settings)).run(code))


def test_with_per_process_limits_only_the_children_together_pass_memory_mb() -> None:
    """The control: what RLIMIT_AS allowed before the cgroup (and still allows with `off`)."""
    result = run(PARENT_AND_CHILDREN, cgroup="off")
    assert result.outcome == "ok", result.stderr
    assert json.loads(result.stdout) == {"holding": CHILDREN, "dead": 0}
    assert CHILDREN * BLOCK_MB > MEMORY_MB
    assert result.memory_peak_bytes is None  # no cgroup, no measure


def test_the_run_cgroup_bounds_a_parent_and_its_children_together() -> None:
    parent, reason = find_cgroup_parent()
    if parent is None:
        pytest.skip(f"this host gives the sandbox no cgroup: {reason}")
    result = run(PARENT_AND_CHILDREN, cgroup="required")
    assert result.outcome == "ok", result.stderr
    seen = json.loads(result.stdout)
    assert seen["holding"] * BLOCK_MB < MEMORY_MB  # at most one block at a time
    assert seen["holding"] + seen["dead"] == CHILDREN
    assert result.memory_peak_bytes is not None
    assert BLOCK_MB * MIB < result.memory_peak_bytes <= MEMORY_MB * MIB


def test_a_program_whose_own_process_passes_the_run_limit_is_a_memory_limit() -> None:
    """A file in its tmpfs is memory too: 100 MiB of /tmp and a 64 MiB block, each under
    RLIMIT_AS, pass 128 MiB together, and the OOM killer ends the program itself."""
    parent, reason = find_cgroup_parent()
    if parent is None:
        pytest.skip(f"this host gives the sandbox no cgroup: {reason}")
    code = (
        "open('/tmp/big', 'wb').write(b'x' * (100 << 20))\n"
        "block = bytearray(64 << 20)\n"
        "block[::4096] = b'x' * (len(block) // 4096)\n"
        "print('survived')\n"
    )
    result = run(code, workdir_mb=128, max_file_size_mb=128)
    assert (result.outcome, result.stdout) == ("memory_limit", ""), result.stderr
    control = run(code, workdir_mb=128, max_file_size_mb=128, cgroup="off")
    assert (control.outcome, control.stdout) == ("ok", "survived\n"), control.stderr
