"""`RunOptions`: the top-level keys `ng_run` reads besides the server instances.

It sits below the launcher (which takes it) and the commands (which read it, or accept its keys in
the config files they share with ng_run); its blocks (`head_server`, `ray`) are checked in detail
where they are used (`launcher.plan`, `launcher.ray.config`), with file:line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ng_cli.config.command_options import CommandOptions

__all__ = ["RunOptions"]


class RunOptions(CommandOptions):
    """What ng_run does with the stack: start it (and where the head server listens) or print its plan."""

    head_server: dict[str, Any] | None = None
    """{host, port}: where the head server listens (default 127.0.0.1:11000; port 0 = any free port)."""
    dry_run: bool = False
    """true: print the plan (engines, servers, commands; secrets masked) and exit without starting anything."""
    ready_file: Path | None = None
    """Write the stack's URLs and pids there as JSON once every server is ready (removed at stop)."""
    ready_timeout_s: float = Field(default=60.0, gt=0)
    """Seconds to wait for every server's /health."""
    install_requirements: bool = False
    """true: pip-install what the servers' requirements.txt name and this environment lacks, before
    anything starts (one environment for the stack; conflicts refused by name; docs/running.md)."""
    install_requirements_timeout_s: float = Field(default=1800.0, gt=0)
    """Seconds pip may run for the servers' requirements before it is stopped (its whole process
    group) and ng_run exits with pip's last lines, nothing started."""
    ray: dict[str, Any] | str | None = None
    """The Ray cluster to run engines and servers on ({address: local|auto|host:port, ...}; docs/ray.md)."""

    @field_validator("ready_file", mode="before")
    @classmethod
    def _a_path(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"expected a file path, got {value!r}")
        return value
