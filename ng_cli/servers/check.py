"""One validation of server blocks, shared by start-up and the checks that run before it.

`validated_config` is what a server process does to its block at start (`child.py`). The
launcher and `ng_dump_config` must refuse exactly what start would refuse, with the same
message, but never import an `app.py` themselves (one broken environment must not take the
parent down), so they run `python -m ng_cli.servers.check`: it reads the blocks as JSON on
stdin (secrets included: never on argv), validates each with its implementation's own config
class through `validated_config`, and writes the problems and warnings as JSON on stdout.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel, ConfigDict

from ng_cli.config.instances import ServerInstance
from ng_cli.config.schema import ServerConfig, validate_block
from ng_cli.config.sources import Sources
from ng_cli.errors import IncompleteConfigError, NgError

if TYPE_CHECKING:
    from ng_cli.servers.base import BaseServer

__all__ = ["BlockCheck", "CheckReport", "check_blocks", "main", "validated_config"]


class BlockCheck(BaseModel):
    """One instance to validate: its block and where each of its keys was written."""

    model_config = ConfigDict(frozen=True)

    name: str
    server_type: str
    implementation: str
    app_path: str
    config: dict[str, Any]
    source: str | None = None
    sources: dict[str, str] = {}
    """Full dotted key -> "file:line" for the instance's keys."""


class CheckReport(BaseModel):
    """What `python -m ng_cli.servers.check` answers."""

    problems: list[tuple[str, str | None]] = []
    """(message, hint) per instance that start would refuse."""
    incomplete: list[tuple[str, str | None]] = []
    """(message, hint) per instance that start would refuse only for placeholders still to be
    filled in (`IncompleteConfigError`)."""
    unimportable: list[tuple[str, str | None]] = []
    """(message, hint) per instance whose app.py could not be imported for want of a module (a
    package the server lists and this environment lacks): its block could not be checked."""
    warnings: list[str] = []


_INSTALL_HINT = (
    "install the packages the server lists (its requirements.txt), or let ng_run do it: "
    "+install_requirements=true"
)


def validated_config(server_class: type[BaseServer[Any]], check: BlockCheck) -> ServerConfig:
    """The instance's typed config, or the ConfigError start-up reports (key, file:line)."""
    instance = ServerInstance(
        check.name, check.server_type, check.implementation, dict(check.config), check.source
    )
    sources = Sources({key: [origin] for key, origin in check.sources.items()})
    return validate_block(server_class.config_class, instance, sources=sources)


def check_blocks(checks: list[BlockCheck]) -> CheckReport:
    """Validate every block; import failures of an app.py are problems too, never a crash."""
    # Here, not at the top: the launcher imports this module for BlockCheck and CheckReport only,
    # and the server framework (FastAPI, aiohttp) is this subprocess's to load, not ng_run's.
    from ng_cli.servers.loading import load_server_class

    report = CheckReport()
    for check in checks:
        try:
            config = validated_config(load_server_class(Path(check.app_path)), check)
        except IncompleteConfigError as error:
            report.incomplete.append((error.message, error.hint))
        except NgError as error:
            report.problems.append((error.message, error.hint))
        except Exception as error:  # an app.py that fails to import: say which, keep checking
            last = traceback.format_exception_only(type(error), error)[-1].strip()
            message = f"instance '{check.name}': importing {check.app_path} failed: {last}"
            if isinstance(error, ImportError):  # a module missing here, not a fault of the block
                report.unimportable.append((message, _INSTALL_HINT))
            else:
                report.problems.append((message, None))
        else:
            report.warnings.extend(config.config_warnings)
    return report


def main() -> None:
    checks = [BlockCheck.model_validate(item) for item in orjson.loads(sys.stdin.buffer.read())]
    with contextlib.redirect_stdout(sys.stderr):  # an app.py that prints must not corrupt the answer
        report = check_blocks(checks)
    sys.stdout.buffer.write(report.model_dump_json().encode())


if __name__ == "__main__":
    main()
