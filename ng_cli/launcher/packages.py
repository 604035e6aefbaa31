"""ng_run's packages step: every server's `requirements.txt` met before anything starts.

    ng_run ... +install_requirements=true

One environment for the whole stack, the one ng_run runs in: every server is a child of this
interpreter (`python -m ng_cli.servers.child`) that imports our server framework in-process, so
a server's packages must sit beside ours. A virtual environment per server (NeMo Gym's way) would
need ng_cli and its dependencies installed into each, and building them is most of NeMo Gym's
start-up time. The cost of sharing: two servers that need versions of a package that cannot both
hold cannot run in one stack. That is found before pip runs and named (both servers, both lines,
the package), as is a server that needs another version of a package ng_cli itself runs on:
those are never changed under the stack.

Without the option, an unmet requirement is a warning naming the server and its line. With it,
met requirements need no pip and no network (read from the environment's own metadata); only the
unmet ones are given to one pip run, with ng_cli's own dependencies pinned at their installed
versions. `+dry_run=true` says what would be installed and installs nothing. pip runs for at most
`+install_requirements_timeout_s`, and a SIGTERM or Ctrl-C to ng_run ends it (its whole process
group) before ng_run exits. A URL's credentials are shown as `***` in every message.
"""

from __future__ import annotations

import importlib.metadata
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Required, TypedDict, Unpack

from packaging.requirements import Requirement

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.paths import implementation_dir
from ng_cli.config.run_options import RunOptions
from ng_cli.errors import ConfigError, LaunchError
from ng_cli.launcher.signals import StopSignals, exit_code_for
from ng_cli.packages.environment import PIP_TIMEOUT_S, pip_install, probe
from ng_cli.packages.requirements import ServerRequirement, read_requirements, requirements_file
from ng_cli.packages.resolve import conflicts, is_satisfied, protected_requirements

__all__ = [
    "INSTALL_OPTION",
    "RequirementsOutcome",
    "ensure_requirement_files",
    "ensure_requirements",
    "requirement_files",
    "run_packages_step",
]

INSTALL_OPTION = "install_requirements"
OWN_DISTRIBUTION = "ng_cli"


@dataclass
class RequirementsOutcome:
    """What the step found and did."""

    files: dict[str, Path] = field(default_factory=dict)
    """Server instance -> its requirements.txt (one instance per folder)."""
    required: list[ServerRequirement] = field(default_factory=list)
    """Every line that counts (NeMo Gym's own skipped)."""
    missing: list[ServerRequirement] = field(default_factory=list)
    """Lines the environment did not meet before the step."""
    installed: bool = False
    """Whether pip ran (and succeeded)."""


def requirement_files(config: ComposedConfig) -> dict[str, Path]:
    """Instance -> the requirements.txt (or pyproject.toml) of its implementation folder, for
    those that have one."""
    files: dict[str, Path] = {}
    seen: set[Path] = set()
    for name, instance in config.instances.items():
        found = requirements_file(implementation_dir(instance.server_type, instance.implementation))
        path = found.resolve() if found else None
        if path is not None and path not in seen:
            seen.add(path)
            files[name] = path
    return files


class _StepOptions(TypedDict, total=False):
    """`ensure_requirement_files`' keywords, which `ensure_requirements` passes on as they are."""

    install: Required[bool]
    dry_run: bool
    python: str
    say: Callable[[str], None]
    warn: Callable[[str], None]
    env: Mapping[str, str] | None
    own_at_installed: bool
    pip_timeout_s: float
    should_stop: Callable[[], bool]


def run_packages_step(
    config: ComposedConfig, options: RunOptions, *, say: Callable[[str], None], warn: Callable[[str], None]
) -> int | None:
    """ng_run's packages step under `StopSignals`: a SIGTERM or SIGINT while it runs stops pip
    (its process group ended and waited for) and returns ng_run's exit code for that signal;
    None when the step is done and the stack may start."""
    with StopSignals() as signals:
        try:
            ensure_requirements(
                config, install=options.install_requirements, dry_run=options.dry_run, say=say, warn=warn,
                pip_timeout_s=options.install_requirements_timeout_s, should_stop=signals.requested,
            )  # fmt: skip
        except LaunchError:
            if signals.signum is None:
                raise
        if signals.signum is None:
            return None
        say("requirements: stopped by a signal; nothing was started")
        return exit_code_for(signals.signum)


def ensure_requirements(config: ComposedConfig, **options: Unpack[_StepOptions]) -> RequirementsOutcome:
    """The step itself for a composed stack's servers (see the module's docstring); raises
    ConfigError for conflicts and LaunchError when pip fails or leaves a requirement unmet."""
    return ensure_requirement_files(requirement_files(config), **options)


def ensure_requirement_files(
    files: Mapping[str, Path],
    *,
    install: bool,
    dry_run: bool = False,
    python: str = sys.executable,
    say: Callable[[str], None] = print,
    warn: Callable[[str], None] = print,
    env: Mapping[str, str] | None = None,
    own_at_installed: bool = True,
    pip_timeout_s: float = PIP_TIMEOUT_S,
    should_stop: Callable[[], bool] = lambda: False,
) -> RequirementsOutcome:
    """The step for given files (server instance -> requirements.txt): for a caller that knows
    the folders itself, such as a harness serving NeMo Gym's folders from NeMo Gym's root.

    `own_at_installed=False` is for an environment of one server's own, layered over the stack's
    (a per-server virtual environment that sees ours): ng_cli's own packages that the server's
    requirements name are then held to the ranges ng_cli declares rather than to the versions
    installed, since a version installed there shadows ours only in that server's process
    (math-verify==0.8.0 for a server whose stack runs 0.9.0; ng_cli asks for >=0.7); the others
    stay pinned where they are (pip need not reconsider them).

    pip runs for at most `pip_timeout_s` and is stopped (its whole process group, waited for)
    as soon as `should_stop()` is true; either is a LaunchError."""
    outcome = RequirementsOutcome(files=dict(files))
    for server, path in outcome.files.items():
        outcome.required.extend(read_requirements(server, path))
    if not outcome.required:
        return outcome
    installed = probe(python)
    outcome.missing = [item for item in outcome.required if not is_satisfied(item, installed)]
    if not install:
        for item in outcome.missing:
            warn(
                f"{item.where}  server '{item.server}' needs '{item.shown}', which is not installed "
                f"here; ng_run +{INSTALL_OPTION}=true installs it"
            )
        return outcome
    protected = protected_requirements(_own_requirements(), installed)
    if not own_at_installed:  # what the servers name is held to ng_cli's range; the rest stays
        named = {item.name for item in outcome.required}
        protected = {
            name: (requirement, None if name in named else version)
            for name, (requirement, version) in protected.items()
        }
    problems = conflicts(outcome.required, protected)
    if problems:
        raise ConfigError(
            "the servers' requirements cannot be installed into one environment:\n"
            + "\n".join(f"  {problem}" for problem in problems),
            hint="nothing was installed or started; run the servers in separate stacks (each its own "
            "environment), or align the versions",
        )
    if not outcome.missing:
        say(f"requirements: all {len(outcome.required)} of {len(outcome.files)} server(s) already met")
        return outcome
    lines = list(dict.fromkeys(item.line for item in outcome.missing))
    shown = "; ".join(dict.fromkeys(item.shown for item in outcome.missing))
    servers = list(dict.fromkeys(item.server for item in outcome.missing))
    if dry_run:
        say(f"requirements: would install for {', '.join(servers)}: {shown}")
        return outcome
    pins = [
        f"{name}=={version}" if version else str(requirement)
        for name, (requirement, version) in sorted(protected.items())
        if version or not own_at_installed
    ]
    say(f"requirements: installing for {', '.join(servers)}: {shown}")
    with tempfile.TemporaryDirectory(prefix="ng_requirements-") as work:
        pip_install(
            python, pins + lines, work_dir=Path(work), on_line=lambda line: say(f"[pip] {line}"),
            env=env, servers=servers, timeout_s=pip_timeout_s, should_stop=should_stop,
        )  # fmt: skip
    outcome.installed = True
    after = probe(python)
    unmet = [item for item in outcome.missing if item.name is not None and not is_satisfied(item, after)]
    if unmet:
        raise LaunchError(
            "pip finished, but these requirements are still not met:\n"
            + "\n".join(f"  {item.describe()}" for item in unmet)
        )
    return outcome


def _own_requirements() -> list[str]:
    """ng_cli's own requirements (its extras' left out): the packages the stack runs on."""
    try:
        declared = importlib.metadata.requires(OWN_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return [line for line in declared if "extra" not in str(Requirement(line).marker or "")]
