"""The sandbox's first process: isolate, drop privileges, then exec the untrusted program.

Run as a standalone script, never imported by the server:

    python -I -S bootstrap.py <plan.json> <status_fd>

It imports the standard library only (the project is not on its path), because it must work
before anything untrusted runs and must not give the program a way into our code. Steps:

    bootstrap (root, host pid namespace; new net/mount/ipc/uts/pid namespaces)
      └── fork: pid 1 of the new pid namespace
            join the run's cgroup (memory.max, pids.max: the whole tree's budget);
            mount a tmpfs as the new root; bind read-only: the interpreter, /usr, /lib...;
            cover the interpreter's site-packages with an empty read-only tmpfs (unless
            site_packages is on); a few /dev nodes; a writable /sandbox with the program, empty /tmp
            chroot; setrlimit; setgroups/setgid/setuid to an unprivileged uid;
            no_new_privs; parent-death signal SIGKILL; close the status fd;
            default signal dispositions, empty signal mask; exec

Its very first step closes every descriptor it inherited but stdin, stdout, stderr and the
status fd: the server's own (its listening socket above all) must never reach the program.

The network namespace has only a loopback interface that is down: no connection leaves it,
not even to 127.0.0.1 of the host. Nothing of the host file system but the read-only binds
exists inside (no /proc, /sys, host /tmp, /work, no file of /root). The interpreter's install
prefix is bound at its own path, because its binary finds libpython there: with pyenv, that
path is under /root, so /root holds the directories leading to the prefix and nothing else. When pid 1 exits, the kernel kills every
other process of its pid namespace, so nothing outlives the run.

Ending a run early: the server sends the bootstrap SIGTERM (wall clock, output cap); the kernel
sends SIGHUP if the server dies (parent-death signal; the bootstrap then also removes the run's
files); our own alarm (`backstop_s`) fires if the server stops supervising. The bootstrap then
SIGKILLs pid 1 and reaps it. It is never the bootstrap that is killed first: an orphaned pid 1
would stay a zombie until the host's init reaps it, holding a process slot of its uid.

The bootstrap reports on `status_fd` (inherited only by itself; closed before exec, so the
program cannot forge it) one JSON line: `{"setup_error": ...}` if isolation failed (the run
is refused: fail closed), else `{"exit_code", "signal", "cpu_s", "isolated"}`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

DEV_NODES = ("null", "zero", "full", "random", "urandom")
WORKDIR = "/sandbox"
PROGRAM = "/sandbox/main.py"

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """Isolation could not be established; the program must not run."""


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise SetupError(f"{what} failed: {os.strerror(errno)} (errno {errno})")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source} on {target}",
    )


def _bind_readonly(host_path: str, root: str, *, extra_flags: int = MS_NODEV) -> None:
    """Make `host_path` visible at the same path inside `root`, read-only and without setuid."""
    target = root + host_path
    if os.path.islink(host_path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(os.readlink(host_path), target)
        return
    if os.path.isdir(host_path):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w"):
            pass
    _mount(host_path, target, None, MS_BIND | MS_REC)
    _mount("none", target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | extra_flags)


def build_root(plan: dict[str, Any], code: bytes) -> None:
    """Populate the new root (a size-capped tmpfs) and chroot into it."""
    root = plan["root_dir"]
    uid = plan["uid"]
    _mount("none", "/", None, MS_REC | MS_PRIVATE)  # nothing we mount may propagate to the host
    options = f"size={plan['tmpfs_bytes']},nr_inodes=4096,mode=0755"
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, options)
    for path in plan["readonly_paths"]:
        if os.path.lexists(path):
            _bind_readonly(path, root)
    for path in plan.get("hidden_paths", ()):
        if os.path.isdir(root + path):  # an empty, read-only directory in its place
            _mount(
                "tmpfs",
                root + path,
                "tmpfs",
                MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                "size=4k,mode=0555",
            )
    os.makedirs(root + "/dev", exist_ok=True)
    for node in DEV_NODES:
        if os.path.exists("/dev/" + node):
            _bind_readonly("/dev/" + node, root, extra_flags=MS_NOEXEC)
    os.mkdir(root + "/tmp", 0o1777)
    os.chmod(root + "/tmp", 0o1777)
    os.mkdir(root + WORKDIR, 0o700)
    os.chown(root + WORKDIR, uid, uid)
    fd = os.open(root + PROGRAM, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(code)
    os.chown(root + PROGRAM, uid, uid)
    os.chdir(root)
    os.chroot(".")
    os.chdir(WORKDIR)


def apply_limits(limits: dict[str, Any]) -> None:
    """Kernel-enforced limits.

    Soft and hard CPU limits are equal: the program is pid 1 of its namespace, which ignores the
    soft limit's SIGXCPU, so the hard limit's SIGKILL is the one that counts.
    """
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"],) * 2)
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"],) * 2)
    if limits["max_processes"] is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["max_processes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["max_open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))


def drop_privileges(uid: int) -> None:
    """Become `uid` for good: no groups, no capabilities, no way back through setuid binaries."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SetupError(f"could not switch to uid {uid}")
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:
        raise SetupError("privileges were not dropped: setuid(0) succeeded")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def close_inherited_fds(status_fd: int) -> None:
    """Close every descriptor but stdin, stdout, stderr and the status pipe.

    The server may hold inheritable descriptors (its listening socket, inherited from ng_run), and
    under uvloop `create_subprocess_exec` ignores `close_fds`: a program holding that socket
    accepted the host's own /verify calls and answered them (issue 24). RLIMIT_NOFILE, set
    later, does not close descriptors above it, so everything goes up to the highest one open.
    """
    if status_fd < 3:
        raise SystemExit(f"bootstrap: the status fd must be 3 or above, got {status_fd}")
    os.closerange(3, status_fd)
    os.closerange(status_fd + 1, _fd_ceiling())  # close_range(2): one call, whatever the count


def _fd_ceiling() -> int:
    """One past the highest open descriptor; without /proc, past any descriptor Linux allows."""
    try:
        return max(int(name) for name in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return 2**31 - 1


def reset_signals() -> None:
    """Default dispositions and an empty mask, for the program: an ignored signal and the mask
    survive exec (a server under nohup would hand its programs an ignored SIGHUP; a blocked
    signal would be blocked in the program too). SIGKILL and SIGSTOP cannot be changed."""
    for signum in signal.valid_signals():
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            with contextlib.suppress(OSError, ValueError):  # glibc reserves two real-time signals
                signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def join_cgroups(procs_files: list[str]) -> None:
    """Move this process (pid "0": the writer) into the run's cgroup, one file per hierarchy; its
    descendants are born there, so memory and pids limits bound the whole run."""
    for path in procs_files:
        with open(path, "w") as handle:
            handle.write("0")


def _report(status_fd: int, payload: dict[str, Any]) -> None:
    os.write(status_fd, (json.dumps(payload) + "\n").encode())


def run_isolated_child(plan: dict[str, Any], code: bytes, status_fd: int) -> None:
    """In the forked child: build the jail, then exec the program (never returns)."""
    try:
        join_cgroups(plan["cgroup_procs"])  # first: whatever the run holds from here on counts
        if plan["isolate"]:
            build_root(plan, code)
            program = PROGRAM
        else:
            program = os.path.join(plan["root_dir"], "main.py")
            with open(program, "wb") as handle:
                handle.write(code)
            if plan["drop_privileges"]:
                os.chown(program, plan["uid"], plan["uid"])
                os.chown(plan["root_dir"], plan["uid"], plan["uid"])
            os.chdir(plan["root_dir"])
        apply_limits(plan["limits"])
        if plan["drop_privileges"]:
            drop_privileges(plan["uid"])
        # Set after the uid change, which clears it; SIGKILL from the bootstrap's namespace reaches pid 1.
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    except (OSError, SetupError) as exc:
        _report(status_fd, {"setup_error": f"{type(exc).__name__}: {exc}"})
        os._exit(127)
    os.close(status_fd)
    argv = [plan["python"], *plan["python_args"], program]
    try:
        os.execve(plan["python"], argv, plan["env"])
    except OSError as exc:
        os.write(2, f"sandbox: cannot execute {plan['python']}: {exc}\n".encode())
        os._exit(127)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGALRM, signal.SIGHUP)
"""SIGTERM: the server stops the run. SIGALRM: our backstop. SIGHUP: the server died."""


class _Child:
    """The program's process, and how the bootstrap's signal handlers end it."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.pid: int | None = None
        self.isolated = True
        self.orphaned = False

    def stop(self, signum: int, _frame: object = None) -> None:
        """Kill the program (main() then reaps it); after SIGHUP, also remove the run's files."""
        if signum == signal.SIGHUP:
            self.orphaned = True
        if self.pid is None:  # not forked yet: nothing mounted, nothing to kill
            if self.orphaned:
                _remove_run_files(self.plan, isolated=False)
            os._exit(128 + signum)
        with contextlib.suppress(ProcessLookupError):
            if self.isolated:
                os.kill(self.pid, signal.SIGKILL)  # pid 1: the kernel then kills its namespace
            else:
                os.killpg(self.pid, signal.SIGKILL)  # its process group: the best we can do


def _die_with_server(child: _Child) -> None:
    """SIGHUP when the server's thread that started us exits (the server died, or stopped
    serving); then nobody else will stop the program or remove the run's files."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGHUP, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != child.plan["server_pid"]:  # it died before the prctl
        child.stop(signal.SIGHUP)


def _isolate(plan: dict[str, Any], status_fd: int) -> bool:
    """Enter new namespaces; False (run unisolated) only where the plan allows it."""
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    try:
        _check(_libc.unshare(flags), "unshare(net, mount, pid, ipc, uts namespaces)")
    except SetupError as exc:
        if not plan["allow_unisolated"]:
            _report(status_fd, {"setup_error": str(exc)})
            sys.exit(127)
        return False
    return True


def _start(plan: dict[str, Any], code: bytes, status_fd: int, child: _Child) -> None:
    """Fork the program with the stop signals held, so a handler never runs without a child pid."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    pid = os.fork()
    if pid == 0:
        reset_signals()  # our handlers first: they must not run in the child
        if not plan["isolate"]:
            os.setpgid(0, 0)  # a group of its own, for the cleanup in main()
        run_isolated_child(plan, code, status_fd)
    child.pid = pid
    signal.alarm(plan["backstop_s"])  # the server enforces the wall clock; this holds if it cannot
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def main() -> None:
    plan_path, status_fd = sys.argv[1], int(sys.argv[2])
    close_inherited_fds(status_fd)  # first: nothing of the server's may reach the program
    with open(plan_path) as handle:
        plan = json.load(handle)
    with open(plan["code_path"], "rb") as handle:
        code = handle.read()
    child = _Child(plan)
    for signum in STOP_SIGNALS:
        signal.signal(signum, child.stop)
    _die_with_server(child)
    plan["isolate"] = child.isolated = _isolate(plan, status_fd)
    _start(plan, code, status_fd, child)
    assert child.pid is not None
    # Wait without reaping: while the program is a zombie its pid (and process group) stay ours.
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    if not child.isolated:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # what it left behind in its group
    _, status, usage = os.wait4(child.pid, 0)
    with contextlib.suppress(BrokenPipeError):  # the server may be gone
        _report(
            status_fd,
            {
                "exit_code": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "isolated": child.isolated,
            },
        )
    if child.orphaned:
        _remove_run_files(plan, child.isolated)


def _remove_run_files(plan: dict[str, Any], isolated: bool) -> None:
    """Remove the run's directory when the server cannot. Never recursively: the tmpfs root (with
    its binds of /usr...) is detached first, and only known files and empty directories are
    removed, so a bind that failed to detach can never be emptied."""
    if isolated:
        _libc.umount2(plan["root_dir"].encode(), MNT_DETACH)
    for remove, path in (
        (os.unlink, plan["code_path"]),
        (os.unlink, plan["plan_path"]),
        (os.rmdir, plan["root_dir"]),
        (os.rmdir, plan["workdir"]),
        *((os.rmdir, directory) for directory in plan["cgroup_dirs"]),
    ):
        with contextlib.suppress(OSError):
            remove(path)


if __name__ == "__main__":
    main()
