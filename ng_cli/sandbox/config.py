"""`SandboxConfig`: the limits and isolation settings of a Python sandbox, as users write them.

An environment embeds it as one field (`sandbox:` in its YAML block), so every environment that
runs model-written code exposes the same knobs with the same names and defaults.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_READONLY_PATHS", "SandboxConfig"]

DEFAULT_READONLY_PATHS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache")
"""System paths the interpreter needs; the interpreter's own prefix is added automatically."""


class SandboxConfig(BaseModel):
    """Limits and isolation of one sandboxed Python run (see `ng_cli.sandbox.runner`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    cpu_time_s: int = Field(default=5, ge=1, le=600)
    """CPU seconds per process (RLIMIT_CPU); then the kernel kills it with SIGKILL."""
    wall_time_s: float = Field(default=10.0, gt=0, le=3600)
    """Wall-clock seconds per run; then the whole process group is killed."""
    memory_mb: int = Field(default=512, ge=32)
    """Memory of the whole run, in MiB: the sum over its processes and its files in /sandbox and
    /tmp (its cgroup; past it the kernel kills the run's largest process). Each process also gets
    this much address space (RLIMIT_AS), so one allocating more sees MemoryError."""
    max_processes: int = Field(default=16, ge=1, le=4096)
    """Processes and threads the program may have at once (the run's cgroup pids.max, and
    RLIMIT_NPROC per sandbox uid)."""
    max_open_files: int = Field(default=64, ge=8)
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    max_file_size_mb: int = Field(default=16, ge=1)
    """Largest file the program may write, in MiB (RLIMIT_FSIZE)."""
    workdir_mb: int = Field(default=64, ge=1)
    """Size of the in-memory file system that holds /sandbox and /tmp, in MiB."""
    max_output_bytes: int = Field(default=1_048_576, ge=1024)
    """stdout plus stderr kept per run; more kills the program (outcome `output_limit`)."""
    max_concurrency: int = Field(default=2, ge=1, le=256)
    """Runs at once in this server; more wait their turn."""
    uid_base: int = Field(default=61000, ge=1000, le=2**31 - 1024)
    """Run number k of the concurrent slots runs as uid/gid `uid_base + k`: unprivileged, owning
    no file on the host, and separate per slot so process limits and signals never cross runs."""
    python_executable: str | None = None
    """Interpreter for the program; default: the server's own base interpreter (not the venv)."""
    site_packages: bool = False
    """Let programs import the interpreter's site-packages (numpy, ...). Off: the standard library
    only, so results do not depend on what happens to be installed (nor on its .pth hooks)."""
    readonly_paths: tuple[str, ...] = DEFAULT_READONLY_PATHS
    """Host paths visible (read-only) inside the sandbox, besides the interpreter's prefix."""
    cgroup: Literal["auto", "required", "off"] = "auto"
    """A cgroup per run, so that `memory_mb` and `max_processes` bound the run's whole process
    tree. `auto`: where the host allows it (root, a writable cgroup v2 with memory and pids, or
    v1), else per-process limits only, with a warning (a run may then hold `max_processes` x
    `memory_mb`). `required`: refuse to start without one. `off`: per-process limits only."""
    allow_unisolated: bool = False
    """UNSAFE. If the namespaces cannot be created (no root), run with limits only, with network
    and the host's files reachable. Off by default: without isolation the run is refused."""
