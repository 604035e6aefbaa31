"""`PythonSandbox`: run untrusted Python in an isolated, limited, short-lived process tree.

Each run gets a fresh temporary directory, a uid of its own among `max_concurrency` slots, and
a child started with `asyncio.create_subprocess_exec` (never `preexec_fn`, which is unsafe in a
threaded server) that execs `bootstrap.py`. The bootstrap does the isolation (see its
docstring): network, mount, pid, ipc and uts namespaces; a tmpfs root with read-only binds of
the interpreter only; rlimits; an unprivileged uid; no_new_privs. Here, on the server's side:

* the wall clock: on expiry the whole process group is SIGKILLed (and the pid namespace dies
  with its init);
* the output cap: stdout plus stderr beyond `max_output_bytes` kills the run;
* a cgroup per run (`cgroups`), which the bootstrap joins first: `memory_mb` and `max_processes`
  bound the whole process tree, not each process; read for the run's peak memory, then removed;
* the environment: the child gets a fixed minimal one, never the server's (no secrets);
* descriptors: uvloop's `create_subprocess_exec` ignores `close_fds`, so the bootstrap inherits
  whatever the server holds that is inheritable; closing it all is the bootstrap's first step;
* fail closed: if the bootstrap reports that isolation failed, the run raises
  `SandboxUnavailableError` instead of running the program unprotected.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import sys
import tempfile
import time
from asyncio.subprocess import Process
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ng_cli.errors import ConfigError
from ng_cli.sandbox.cgroups import CgroupParent, RunCgroup, find_cgroup_parent
from ng_cli.sandbox.config import SandboxConfig
from ng_cli.sandbox.errors import SandboxError, SandboxUnavailableError
from ng_cli.sandbox.result import ExecutionResult, classify

__all__ = ["BOOTSTRAP", "PythonSandbox", "build_plan", "interpreter_of"]

logger = logging.getLogger("ng_cli.sandbox")

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
_BOOTSTRAP_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
_PROGRAM_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/sandbox",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
}
_PROGRAM_ARGS = ["-I", "-B"]
"""Isolated mode: no PYTHON* variables, no user site, no script directory on sys.path; no .pyc
writes. `-S` (no site-packages, no .pth start-up hooks) is added unless `site_packages` is set."""
_MIB = 1024 * 1024
_STOP_GRACE_S = 5
"""How long the bootstrap gets to kill and reap the program when asked, before we SIGKILL it."""


def interpreter_of(config: SandboxConfig) -> tuple[str, str]:
    """(the interpreter to run programs with, the install prefix to make visible for it)."""
    if config.python_executable is not None:
        python = os.path.realpath(config.python_executable)
        if not os.path.isfile(python):
            raise ConfigError(f"sandbox.python_executable: {config.python_executable!r} is not a file")
        return python, str(Path(python).parent.parent)
    # The venv's python is a symlink into the base installation; its stdlib lives under base_prefix.
    return os.path.realpath(sys.executable), sys.base_prefix


def _check_exposure(paths: list[str], protected: Path) -> None:
    """Refuse a read-only bind that would show the server's working directory (env.yaml, configs)."""
    for path in paths:
        resolved = Path(os.path.realpath(path))
        if protected == resolved or resolved in protected.parents:
            raise ConfigError(
                f"sandbox: binding {path!r} into the sandbox would expose {protected} to untrusted code",
                hint="remove it from sandbox.readonly_paths, or install the interpreter outside the project",
            )


def _site_packages(prefix: str) -> list[str]:
    """The install prefix's package folders: not importable under `-S`, and not to be read either."""
    return sorted(
        str(path)
        for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages")
        for path in Path(prefix).glob(pattern)
    )


def build_plan(
    config: SandboxConfig,
    *,
    workdir: Path,
    uid: int,
    python: str,
    prefix: str,
    cgroup: RunCgroup | None = None,
) -> dict[str, Any]:
    """The JSON plan `bootstrap.py` follows for one run in `workdir` (see `_run_in` for its files)."""
    is_root = os.geteuid() == 0
    return {
        "workdir": str(workdir),
        "cgroup_procs": cgroup.procs_files if cgroup else [],
        "cgroup_dirs": [str(directory) for directory in cgroup.directories] if cgroup else [],
        "root_dir": str(workdir / "root"),
        "code_path": str(workdir / "main.py"),
        "plan_path": str(workdir / "plan.json"),
        "uid": uid,
        "server_pid": os.getpid(),
        "backstop_s": math.ceil(config.wall_time_s) + _STOP_GRACE_S + 25,
        "allow_unisolated": config.allow_unisolated,
        "drop_privileges": is_root,
        "tmpfs_bytes": config.workdir_mb * _MIB,
        "readonly_paths": [*config.readonly_paths, prefix],
        "hidden_paths": [] if config.site_packages else _site_packages(prefix),
        "limits": {
            "cpu_s": config.cpu_time_s,
            "memory_bytes": config.memory_mb * _MIB,
            "file_size_bytes": config.max_file_size_mb * _MIB,
            # Counted per real uid: only meaningful when each run has a uid of its own.
            "max_processes": config.max_processes if is_root else None,
            "max_open_files": config.max_open_files,
        },
        "python": python,
        "python_args": _PROGRAM_ARGS if config.site_packages else [*_PROGRAM_ARGS, "-S"],
        "env": _PROGRAM_ENV,
    }


@dataclass
class _Capture:
    """Output read so far, under one byte budget shared by stdout and stderr."""

    limit: int
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    total: int = 0
    truncated: bool = False
    timed_out: bool = False
    wall_s: float = 0.0

    async def drain(self, stream: asyncio.StreamReader | None, buffer: bytearray, process: Process) -> None:
        """Keep what fits in the budget; past it, stop the run and read on to EOF, discarding."""
        if stream is None:
            return
        while chunk := await stream.read(65536):
            room = self.limit - self.total
            if len(chunk) > room and not self.truncated:
                self.truncated = True
                _ask_to_stop(process)
            taken = chunk[: max(room, 0)]
            buffer += taken
            self.total += len(taken)


class PythonSandbox:
    """Runs Python source with stdin in the sandbox; at most `max_concurrency` runs at once."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.python, self.prefix = interpreter_of(config)
        _check_exposure([*config.readonly_paths, self.prefix], Path.cwd().resolve())
        self.cgroups = _cgroup_parent(config)
        """Where each run gets its cgroup; None: per-process limits only."""
        self._uids: asyncio.Queue[int] = asyncio.Queue()
        for slot in range(config.max_concurrency):
            self._uids.put_nowait(config.uid_base + slot)

    async def check(self) -> None:
        """Run a trivial program; raise SandboxUnavailableError if the sandbox cannot work here."""
        result = await self.run("print('ok')")
        if result.stdout.strip() != "ok" or not result.ok:
            raise SandboxUnavailableError(
                f"the sandbox self-check failed ({result.outcome}, exit {result.exit_code}): "
                f"{result.stderr[-500:] or 'no output'}"
            )

    async def run(self, code: str, *, stdin: str = "") -> ExecutionResult:
        """Run `code` as a fresh program; its stdin is `stdin`. Never raises for the program's faults."""
        uid = await self._uids.get()
        try:
            # The bootstrap removes the directory itself if this server thread dies mid-run.
            with tempfile.TemporaryDirectory(prefix="ng-sandbox-", ignore_cleanup_errors=True) as workdir:
                return await self._run_in(Path(workdir), uid, code, stdin.encode())
        finally:
            self._uids.put_nowait(uid)

    async def _run_in(self, workdir: Path, uid: int, code: str, stdin: bytes) -> ExecutionResult:
        """One run in `workdir`, in a cgroup of its own where the host has them."""
        cgroup = self._create_cgroup(workdir.name)
        try:
            capture, report, returncode = await self._run_bootstrap(workdir, uid, code, stdin, cgroup)
            memory_peak = cgroup.memory_peak_bytes() if cgroup else None
            oom_killed = bool(cgroup and cgroup.oom_kills())
        finally:
            if cgroup:
                _remove_cgroup(cgroup)
        return self._result(capture, report, returncode, memory_peak=memory_peak, oom_killed=oom_killed)

    def _create_cgroup(self, name: str) -> RunCgroup | None:
        if self.cgroups is None:
            return None
        memory_bytes = self.config.memory_mb * _MIB
        try:
            return self.cgroups.create(name, memory_bytes=memory_bytes, max_pids=self.config.max_processes)
        except OSError as exc:
            raise SandboxUnavailableError(
                f"the sandbox could not make the run's cgroup under {self.cgroups.memory_parent}, "
                f"so nothing ran: {exc}"
            ) from exc

    async def _run_bootstrap(
        self, workdir: Path, uid: int, code: str, stdin: bytes, cgroup: RunCgroup | None
    ) -> tuple[_Capture, dict[str, Any], int | None]:
        """The bootstrap with `main.py` (the program), `plan.json`, and `root/`, the mount point of
        the run's tmpfs root (in its own mount namespace; empty as seen from here), in `workdir`."""
        plan = build_plan(
            self.config, workdir=workdir, uid=uid, python=self.python, prefix=self.prefix, cgroup=cgroup
        )
        _write_run_files(plan, code)
        read_fd, write_fd = os.pipe()
        try:
            try:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-I",
                    "-S",
                    str(BOOTSTRAP),
                    plan["plan_path"],
                    str(write_fd),
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    pass_fds=(write_fd,),
                    start_new_session=True,
                    env=_BOOTSTRAP_ENV,
                    cwd=workdir,
                )
            finally:
                os.close(write_fd)
            capture = await _supervise(process, stdin, self.config)
            report = _read_report(read_fd)
        finally:
            os.close(read_fd)
        return capture, report, process.returncode

    def _result(
        self,
        capture: _Capture,
        report: dict[str, Any],
        returncode: int | None,
        *,
        memory_peak: int | None,
        oom_killed: bool,
    ) -> ExecutionResult:
        stderr = capture.stderr.decode("utf-8", "replace")
        if "setup_error" in report:
            raise SandboxUnavailableError(
                f"the sandbox could not isolate the program, so it did not run: {report['setup_error']}",
                hint="run the server as root on Linux (namespaces, mounts, setuid), or, knowing the risk, "
                "set sandbox.allow_unisolated: true",
            )
        if "exit_code" not in report and not (capture.timed_out or capture.truncated):
            raise SandboxError(
                f"the sandbox bootstrap ended (status {returncode}) without a report: {stderr[-500:]}"
            )
        exit_code, signal_number = report.get("exit_code"), report.get("signal")
        if "exit_code" not in report:
            signal_number = signal.SIGKILL
        isolated = bool(report.get("isolated", True))
        if not isolated:
            logger.warning("a program ran WITHOUT isolation (sandbox.allow_unisolated is true)")
        cpu_s = float(report.get("cpu_s", 0.0))
        outcome = classify(
            exit_code=exit_code,
            signal_number=signal_number,
            cpu_s=cpu_s,
            cpu_limit_s=self.config.cpu_time_s,
            timed_out=capture.timed_out,
            output_truncated=capture.truncated,
            oom_killed=oom_killed,
        )
        return ExecutionResult(
            outcome=outcome,
            stdout=capture.stdout.decode("utf-8", "replace"),
            stderr=stderr,
            exit_code=exit_code,
            signal=signal_number,
            cpu_s=cpu_s,
            wall_s=capture.wall_s,
            isolated=isolated,
            memory_peak_bytes=memory_peak,
        )


def _cgroup_parent(config: SandboxConfig) -> CgroupParent | None:
    """Where runs get their cgroups, per `config.cgroup`; a warning when runs go without."""
    if config.cgroup == "off":
        return None
    parent, reason = find_cgroup_parent()
    if parent is not None:
        logger.info("sandbox runs get a cgroup each: %s", reason)
    elif config.cgroup == "required":
        raise SandboxUnavailableError(
            f"the sandbox cannot give each run a cgroup ({reason}), and sandbox.cgroup is 'required'",
            hint="run the server as root with a writable /sys/fs/cgroup (v2 with the memory and pids "
            "controllers, or v1), or set sandbox.cgroup: auto to fall back to per-process limits",
        )
    else:
        logger.warning(
            "sandbox runs get no cgroup (%s): memory_mb and max_processes bound each process, "
            "so one run may hold up to max_processes x memory_mb",
            reason,
        )
    return parent


def _remove_cgroup(cgroup: RunCgroup) -> None:
    """Its processes are gone (the pid namespace died with its pid 1); say so if one is not."""
    try:
        cgroup.remove()
    except OSError as exc:
        logger.warning("could not remove the run's cgroup %s: %s", cgroup.memory_dir, exc)


def _write_run_files(plan: dict[str, Any], code: str) -> None:
    """A few small local writes, done inline: cheaper than a thread hop."""
    os.mkdir(plan["root_dir"])
    with open(plan["code_path"], "w", encoding="utf-8") as handle:
        handle.write(code)
    with open(plan["plan_path"], "w", encoding="utf-8") as handle:
        json.dump(plan, handle)


async def _supervise(process: Process, stdin: bytes, config: SandboxConfig) -> _Capture:
    """Feed stdin, collect output under the cap, enforce the wall clock, and always end the run."""
    capture = _Capture(limit=config.max_output_bytes)
    started = time.monotonic()
    feeding = asyncio.create_task(_feed(process.stdin, stdin))
    draining = asyncio.gather(
        capture.drain(process.stdout, capture.stdout, process),
        capture.drain(process.stderr, capture.stderr, process),
    )
    try:
        await asyncio.wait_for(asyncio.shield(asyncio.gather(draining, process.wait())), config.wall_time_s)
    except TimeoutError:
        capture.timed_out = True
    finally:
        feeding.cancel()
        await _stop(process)
        capture.wall_s = time.monotonic() - started
        # Read the pipes to EOF, so their transports close: with isolation every writer is dead now.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(draining), _STOP_GRACE_S)
        if not draining.done():  # only without isolation: a daemon escaped the group, holding a pipe
            draining.cancel()
            process._transport.close()  # type: ignore[attr-defined]  # no public way to drop the pipes
    return capture


def _ask_to_stop(process: Process) -> None:
    """SIGTERM the bootstrap only: it kills the program (and so its namespace) and reaps it."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)


async def _stop(process: Process) -> None:
    """End the run. Killing the bootstrap itself would orphan the program's zombie (reaped, or
    not, by whatever init the host has), so it is asked first and SIGKILLed only if it hangs."""
    _ask_to_stop(process)
    try:
        await asyncio.wait_for(asyncio.shield(process.wait()), _STOP_GRACE_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # still alive, so the group id is still ours
        await process.wait()


async def _feed(writer: asyncio.StreamWriter | None, data: bytes) -> None:
    if writer is None:
        return
    try:
        if data:
            writer.write(data)
            await writer.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the program exited (or closed stdin) without reading all of it
    finally:
        writer.close()


def _read_report(fd: int) -> dict[str, Any]:
    """The bootstrap's last status line; non-blocking, since a killed run may have written none."""
    os.set_blocking(fd, False)
    chunks = []
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    report: dict[str, Any] = {}
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            parsed = json.loads(line)
            if isinstance(parsed, dict):
                report.update(parsed)
    return report
