"""Per-run cgroups: one memory and process budget for the whole process tree of a sandboxed run.

RLIMIT_AS bounds each process, so a program that forks used `memory_mb` per process: a parent
and 7 children reached 3.5 GB RSS against `memory_mb: 512` (issue 24). A cgroup per run bounds
their sum: its memory limit is `memory_mb` (no swap), its pids limit `max_processes`, and when
the run would pass the memory limit the kernel's OOM killer ends a process of that run, the
largest, never one outside it. Files the program writes to its tmpfs (/sandbox, /tmp) are
memory too, and count.

Where the run cgroups go, found once per sandbox (`find_cgroup_parent`, which probes each
candidate by making a cgroup there):

* cgroup v2, when the unified hierarchy offers the memory and pids controllers: directly under
  its mount's root cgroup, which may pass controllers down while holding processes (any other
  cgroup with processes may not: the "no internal processes" rule);
* else cgroup v1: under this server's own cgroup in the memory and in the pids hierarchy.

The server makes the run's cgroup, the bootstrap moves the program's first process into it
before anything runs, and the server reads its peak and OOM count and removes it after the run
(or the bootstrap does, if the server died). Without a usable hierarchy (not root, a read-only
/sys/fs/cgroup, a v2 container whose root cgroup holds processes), `SandboxConfig.cgroup`
decides: `auto` falls back to the per-process limits (a run may then hold up to
`max_processes` x `memory_mb`), `required` refuses to run.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["CgroupParent", "RunCgroup", "cgroup_parents", "find_cgroup_parent"]

_CONTROLLERS = ("memory", "pids")


@dataclass(frozen=True)
class RunCgroup:
    """The cgroup of one run: one directory on v2, one per hierarchy (memory, pids) on v1."""

    version: Literal[1, 2]
    memory_dir: Path
    pids_dir: Path

    @property
    def directories(self) -> list[Path]:
        return sorted({self.memory_dir, self.pids_dir})

    @property
    def procs_files(self) -> list[str]:
        """The files the bootstrap writes its pid to (as "0": itself), one per hierarchy."""
        return [str(directory / "cgroup.procs") for directory in self.directories]

    def memory_peak_bytes(self) -> int | None:
        """The most memory the run held at once; None where the kernel does not say (v2 < 5.19)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.memory_dir / name).read_text())
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int:
        """How many of the run's processes the OOM killer ended (v1: kernel 4.13 and later)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            lines = (self.memory_dir / name).read_text().splitlines()
        except OSError:
            return 0
        counts = dict(line.split(maxsplit=1) for line in lines if " " in line)
        return int(counts.get("oom_kill", 0))

    def remove(self) -> None:
        """Remove the run's directories; the run's processes are gone by now."""
        for directory in self.directories:
            with contextlib.suppress(FileNotFoundError):
                directory.rmdir()


@dataclass(frozen=True)
class CgroupParent:
    """Where this server makes its run cgroups (see the module docstring)."""

    version: Literal[1, 2]
    memory_parent: Path
    pids_parent: Path

    def create(self, name: str, *, memory_bytes: int, max_pids: int) -> RunCgroup:
        """Make the cgroup of run `name` with its limits; OSError if the kernel refuses."""
        run = RunCgroup(self.version, self.memory_parent / name, self.pids_parent / name)
        try:
            for directory in run.directories:
                directory.mkdir()
            if self.version == 2:
                _write(run.memory_dir / "memory.max", memory_bytes)
                _write_if_present(run.memory_dir / "memory.swap.max", 0)
            else:
                _write(run.memory_dir / "memory.limit_in_bytes", memory_bytes)
                _write_if_present(run.memory_dir / "memory.memsw.limit_in_bytes", memory_bytes)
            _write(run.pids_dir / "pids.max", max_pids)
        except OSError:
            run.remove()
            raise
        return run


def _write(path: Path, value: int | str) -> None:
    path.write_text(f"{value}\n")


def _write_if_present(path: Path, value: int) -> None:
    """Swap limits exist only where the kernel accounts swap."""
    if path.exists():
        _write(path, value)


def find_cgroup_parent() -> tuple[CgroupParent | None, str]:
    """This host's parent for run cgroups, probed by making one; else None and the reasons."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        own = Path("/proc/self/cgroup").read_text()
    except OSError as exc:
        return None, f"cannot read /proc/self: {exc}"
    candidates = cgroup_parents(mountinfo, own, controllers_of=_v2_controllers)
    problems = []
    for parent in candidates:
        try:
            if parent.version == 2:
                _enable_controllers(parent.memory_parent)
            probe = parent.create(
                f"ng-sandbox-probe-{secrets.token_hex(4)}", memory_bytes=1 << 30, max_pids=16
            )
            probe.remove()
        except OSError as exc:
            problems.append(f"cgroup v{parent.version} under {parent.memory_parent}: {exc.strerror or exc}")
            continue
        return parent, f"cgroup v{parent.version} under {parent.memory_parent}"
    if not candidates:
        problems.append("no cgroup v2 with the memory and pids controllers, nor cgroup v1 memory and pids")
    return None, "; ".join(problems)


def _v2_controllers(mount_point: Path) -> set[str]:
    try:
        return set((mount_point / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def _enable_controllers(root: Path) -> None:
    """Let the root cgroup's children use memory and pids (usually done already, by systemd)."""
    enabled = set((root / "cgroup.subtree_control").read_text().split())
    missing = [name for name in _CONTROLLERS if name not in enabled]
    if missing:
        _write(root / "cgroup.subtree_control", " ".join(f"+{name}" for name in missing))


@dataclass(frozen=True)
class _Mount:
    root: str
    point: Path
    fstype: str
    options: frozenset[str]


def cgroup_parents(
    mountinfo: str, own_cgroups: str, *, controllers_of: Callable[[Path], set[str]]
) -> list[CgroupParent]:
    """Pure: the candidates, best first, from /proc/self/mountinfo and /proc/self/cgroup.

    `controllers_of(mount_point)` reads a v2 mount's `cgroup.controllers`."""
    mounts = [mount for line in mountinfo.splitlines() if (mount := _parse_mount(line))]
    candidates = [
        CgroupParent(2, mount.point, mount.point)
        for mount in mounts
        if mount.fstype == "cgroup2" and set(_CONTROLLERS) <= controllers_of(mount.point)
    ]
    paths = _own_v1_paths(own_cgroups)
    v1: dict[str, Path] = {}
    for name in _CONTROLLERS:
        mount = next((m for m in mounts if m.fstype == "cgroup" and name in m.options), None)
        if mount is not None and name in paths:
            v1[name] = mount.point / _relative(paths[name], mount.root)
    if len(v1) == len(_CONTROLLERS):
        candidates.append(CgroupParent(1, v1["memory"], v1["pids"]))
    return candidates


def _parse_mount(line: str) -> _Mount | None:
    """One line of /proc/self/mountinfo: `id parent dev root point options [tags] - type source super`."""
    before, separator, after = line.partition(" - ")
    fields, tail = before.split(), after.split()
    if not separator or len(fields) < 5 or len(tail) < 3:
        return None
    options = frozenset(tail[2].split(","))
    return _Mount(
        root=_unescape(fields[3]), point=Path(_unescape(fields[4])), fstype=tail[0], options=options
    )


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _own_v1_paths(own_cgroups: str) -> dict[str, str]:
    """Controller -> this process's cgroup path, from the v1 lines (`id:controllers:path`)."""
    paths: dict[str, str] = {}
    for line in own_cgroups.splitlines():
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        for name in controllers.split(","):
            if name:
                paths[name] = path
    return paths


def _relative(path: str, mount_root: str) -> str:
    """`path` (as /proc/self/cgroup shows it) inside a mount of the hierarchy's `mount_root`."""
    if mount_root != "/" and (path == mount_root or path.startswith(mount_root + "/")):
        path = path[len(mount_root) :]
    return os.path.relpath(path or "/", "/") if path not in ("", "/") else "."
