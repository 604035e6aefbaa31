"""`check_instances`: every server block validated by its own implementation before anything starts.

`ng_run` (dry run included) and `ng_dump_config` call it, so what a server would refuse at
start is refused first, with the message start-up would print (the same function makes it:
`ng_cli.servers.check.validated_config`). The app.py files are imported in one short-lived
child process, never in the launcher.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import orjson
from rich.console import Console
from rich.text import Text

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.paths import implementation_dir
from ng_cli.errors import ConfigError, IncompleteConfigError
from ng_cli.launcher import check_cache
from ng_cli.launcher.plan import instance_sources, plan_stack
from ng_cli.servers.check import BlockCheck, CheckReport

__all__ = ["CHECK_TIMEOUT_S", "check_instances", "print_warnings"]

CHECK_TIMEOUT_S = 120.0
"""Longest the check may take (it imports every app.py of the stack once)."""


def check_instances(
    config: ComposedConfig,
    *,
    python: str = sys.executable,
    incomplete_ok: bool = False,
    unimportable_ok: bool = False,
) -> list[str]:
    """Validate every instance as start-up will; the warnings, or one ConfigError with every problem.

    A config refused only for placeholders still to be filled in raises `IncompleteConfigError`;
    with `incomplete_ok` (ng_validate) those come back as warnings that it will not start as-is.
    An app.py that cannot be imported for want of a module is a problem, or with `unimportable_ok`
    (ng_validate: NeMo Gym's validate imports no server) a warning that its block was not checked."""
    planned: list[str] = []
    try:
        plan_stack(config, run_dir=Path(tempfile.gettempdir()))  # entrypoints, hosts, ports, engines
    except IncompleteConfigError as error:  # e.g. an engine's weights not on this machine yet
        if not incomplete_ok:
            raise
        planned.append(_incomplete(error.message, error.hint))
    checks = [
        BlockCheck(
            name=instance.name,
            server_type=instance.server_type,
            implementation=instance.implementation,
            app_path=str(
                implementation_dir(instance.server_type, instance.implementation)
                / str(instance.block.get("entrypoint") or "app.py")
            ),
            config=instance.block,
            source=instance.source,
            sources=instance_sources(config, instance),
        )
        for instance in config.instances.values()
    ]
    if not checks:
        return planned
    payload = orjson.dumps([check.model_dump() for check in checks])
    app_paths = [check.app_path for check in checks]
    key = check_cache.cache_key(payload, app_paths, python)
    report = check_cache.remembered(key) if key else None
    if report is None:
        report = _run_check(payload, python)
        if key:
            check_cache.remember(key, report)
    unimportable = [] if unimportable_ok else report.unimportable
    if report.problems or unimportable:
        _refuse(report.problems + unimportable + report.incomplete, ConfigError)
    if report.incomplete and not incomplete_ok:
        _refuse(report.incomplete, IncompleteConfigError)
    not_checked = [_not_checked(message, hint) for message, hint in report.unimportable]
    incomplete = [_incomplete(message, hint) for message, hint in report.incomplete]
    return report.warnings + planned + not_checked + incomplete


def _run_check(payload: bytes, python: str) -> CheckReport:
    """`python -m ng_cli.servers.check` over the blocks: the app.py files imported in a child."""
    try:
        result = subprocess.run(
            [python, "-m", "ng_cli.servers.check"],
            input=payload,
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(
            f"checking the server configs took longer than {CHECK_TIMEOUT_S:g} s (importing the app.py files)"
        ) from exc
    if result.returncode != 0:
        tail = result.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise ConfigError("checking the server configs failed:\n" + "\n".join(tail))
    return CheckReport.model_validate_json(result.stdout)


def _not_checked(message: str, hint: str | None) -> str:
    return f"not checked here, will not start as-is: {message}" + (f"\n  hint: {hint}" if hint else "")


def _incomplete(message: str, hint: str | None) -> str:
    return f"will not start as-is: {message}" + (f"\n  hint: {hint}" if hint else "")


def _refuse(problems: list[tuple[str, str | None]], error: type[ConfigError]) -> NoReturn:
    if len(problems) == 1:
        message, hint = problems[0]
        raise error(message, hint=hint)
    listing = "\n".join(message for message, _ in problems)
    hints = "; ".join(dict.fromkeys(hint for _, hint in problems if hint))
    raise error(f"{len(problems)} server configs would be refused at start:\n{listing}", hint=hints or None)


def print_warnings(warnings: list[str], console: Console | None = None) -> None:
    """`warning: ...` lines on stderr (plain text: messages hold brackets)."""
    console = console or Console(stderr=True, highlight=False, soft_wrap=True)
    for warning in warnings:
        console.print(Text.assemble(("warning: ", "bold yellow"), warning))
