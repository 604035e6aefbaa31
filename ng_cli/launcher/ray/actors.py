"""The Ray actors of a stack: each owns one OS process on its node (a vLLM engine or a server child).

An actor is a thin owner, not a second supervisor: it starts the process the launcher planned
(the same argv a local child gets), keeps its output for the driver to read (`poll`), and ends
it with its process group (`stop`). The process group dies with its actor too: a watchdog
process reads a pipe that only the actor holds, and SIGKILLs the group when the pipe closes
(the actor died, however). `PR_SET_PDEATHSIG` alone is not enough: vLLM answers its SIGTERM
with a graceful shutdown that waits on in-flight requests, so a killed actor left a vLLM
holding its clients' connections open, and vLLM's EngineCore process has a death signal of its own.

Secrets (the engines' key, a server's spec) never appear in the actor's arguments, which Ray
records and its dashboard shows: the launcher puts them in the object store and passes the
reference inside a list, so Ray does not resolve it into the call; the actor `ray.get`s it.

This module imports Ray at the top: only `launcher.ray.backend` imports it, and only when a
config sets `ray.address`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import ray

from ng_cli.engines.plan import ENGINE_MAIN

__all__ = ["ENGINE_MAIN_TOKEN", "GpuLease", "NodeProbe", "ProcessHost"]

_ray_util: Any = ray.util  # partly untyped, and absent for mypy where the extra is not installed

ENGINE_MAIN_TOKEN = "{ng_engine_main}"
"""Stands for `engines/engine_main.py` in an engine's argv: its path on the actor's node may differ."""
_KEPT_LINES = 5000
"""Lines kept between two polls (the driver polls several times a second)."""
_WATCHDOG = """
import os, signal, sys
sys.stdin.buffer.read()  # returns when the actor's end of the pipe closes: stop(), or its death
try:
    os.killpg(int(sys.argv[1]), signal.SIGKILL)
except OSError:
    pass
if sys.argv[2]:
    try:
        os.unlink(sys.argv[2])  # the spec file, if the child never got to read (and delete) it
    except OSError:
        pass
"""


class _ProcessHost:
    """Owns one process on this node: its socket (servers), its output, its end."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.process: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.listener: socket.socket | None = None
        self.lines: list[str] = []
        self.first = 0
        """Index (since start) of `lines[0]`: the driver's cursor counts every line ever read."""
        self.lock = threading.Lock()
        self.read_all = False
        """The process's output is read to its end (its exit code may be reported)."""
        self.spec_path: Path | None = None
        """A server's 0600 spec file (engines need none): a lone file, no folder, since the child
        deletes it after reading and nothing may be left behind (a folder was, on a lost node)."""

    def node(self) -> dict[str, Any]:
        """Where this actor runs: node IP and id, host name, the actor's own pid."""
        context = ray.get_runtime_context()
        return {
            "ip": _ray_util.get_node_ip_address(),
            "node_id": context.get_node_id(),
            "hostname": socket.gethostname(),
            "actor_pid": os.getpid(),
        }

    def gpu_ids(self) -> list[str]:
        return [str(gpu) for gpu in ray.get_gpu_ids()]

    def free_ports(self, host: str, count: int) -> list[int]:
        """Ports free on this node now (vLLM binds its own sockets, so it cannot inherit one)."""
        held = []
        try:
            for _ in range(count):
                sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
                sock.bind((host, 0))
                held.append(sock)
            return [sock.getsockname()[1] for sock in held]
        finally:
            for sock in held:
                sock.close()

    def listen(self, host: str, port: int) -> int:
        """Bind and listen for a server child (it inherits the socket: no port race on this node)."""
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.set_inheritable(True)
        self.listener = sock
        return int(sock.getsockname()[1])

    def start(self, argv: list[str], secret: list[Any]) -> int:
        """Start the process; `secret` holds one object-store reference: {env, unset, spec}."""
        payload = ray.get(secret[0])
        env = dict(os.environ)
        for key in payload.get("unset", ()):
            env.pop(key, None)
        env.update(payload.get("env", {}))
        env["PYTHONUNBUFFERED"] = "1"
        command = [str(ENGINE_MAIN) if part == ENGINE_MAIN_TOKEN else part for part in argv]
        cwd = payload.get("cwd")
        if command and command[0] == "{python}":
            command[0] = sys.executable  # a server child: this node's project interpreter
        pass_fds: tuple[int, ...] = ()
        if payload.get("spec") is not None:
            assert self.listener is not None, "listen() first"
            spec = dict(payload["spec"], listen_fd=self.listener.fileno())
            fd, path = tempfile.mkstemp(prefix="ng_ray-", suffix=".json")  # 0600
            self.spec_path = Path(path)
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps(spec))
            command.append(path)
            pass_fds = (self.listener.fileno(),)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=pass_fds,
            process_group=0,
            env=env,
            cwd=cwd if cwd and os.path.isdir(cwd) else None,  # the driver's, where this node has it
        )
        self.watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(self.process.pid), str(self.spec_path or "")],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # the raylet ends a dead worker's process group: not this one
        )
        if self.listener is not None:  # the child holds its copy; ours would keep the port after a crash
            self.listener.close()
        threading.Thread(target=self._read, name=f"read-{self.name}", daemon=True).start()
        return self.process.pid

    def poll(self, cursor: int) -> tuple[list[str], int, int | None]:
        """Lines since `cursor`, the new cursor, and the exit code once the process has ended."""
        code = self.process.poll() if self.process is not None else None
        with self.lock:
            start = max(cursor, self.first)
            new = self.lines[start - self.first :]
            end = self.first + len(self.lines)
            if code is not None and self.read_all:
                return new, end, code
        return new, end, None

    def stop(self, grace_s: float) -> int | None:
        """SIGTERM the process group, SIGKILL it after `grace_s`; the exit code."""
        if self.spec_path is not None:
            self.spec_path.unlink(missing_ok=True)
        if self.listener is not None:
            self.listener.close()
        if self.process is None:
            return None
        for signum in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)
            deadline = time.monotonic() + (grace_s if signum == signal.SIGTERM else 2.0)
            while self.process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.process.poll() is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, signal.SIGKILL)  # what it started, if still there
                break
        if self.watchdog is not None and self.watchdog.stdin is not None:
            self.watchdog.stdin.close()  # it SIGKILLs the (empty) group and exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.watchdog.wait(timeout=2.0)
        return self.process.poll()

    def _read(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        with self.process.stdout as stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                with self.lock:
                    self.lines.append(line)
                    if len(self.lines) > _KEPT_LINES:
                        drop = len(self.lines) - _KEPT_LINES
                        del self.lines[:drop]
                        self.first += drop
        self.read_all = True


class _GpuLease:
    """Holds one bundle's GPU for an engine whose actor sits on another bundle, and says which it is."""

    def gpu_ids(self) -> list[str]:
        return [str(gpu) for gpu in ray.get_gpu_ids()]


def _node_id() -> str:
    return str(ray.get_runtime_context().get_node_id())


_remote: Any = ray.remote  # Ray's overloads know no actor options (max_concurrency)
ProcessHost: Any = _remote(max_restarts=0)(_ProcessHost)
"""Not threaded: calls run on the worker's main thread, so a child's PR_SET_PDEATHSIG (tied to the
thread that forked it) fires when the actor dies, not when a pool thread ends."""
GpuLease: Any = _remote(max_restarts=0)(_GpuLease)
NodeProbe: Any = _remote(num_cpus=0, max_retries=0)(_node_id)
"""A task pinned to a node (`launcher.ray.verdict`): that it ran there is Ray's word that the node runs work."""
