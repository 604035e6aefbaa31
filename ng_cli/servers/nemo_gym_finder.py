"""The `nemo_gym` import names, answered by our stand-ins (`ng_cli.nemo_gym_compat.api.*`).

Standard library only: `ng_cli.servers.loading` imports this module, and nothing of ours may
import the server framework from below it. The finder is installed only when an `app.py` that
imports `nemo_gym` is loaded, and only if no real `nemo_gym` can be imported: a user's own NeMo Gym
always wins, and its servers are then NeMo Gym's to run.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType

__all__ = ["STAND_INS", "NemoGymFinder", "install", "installed", "real_nemo_gym_origin", "uninstall"]

PACKAGE = "nemo_gym"
_API = "ng_cli.nemo_gym_compat.api"

STAND_INS = frozenset(
    {
        "base_environment_server",
        "base_resources_server",
        "base_responses_api_agent",
        "base_responses_api_model",
        "config_types",
        "deliverables",
        "episode_types",
        "failure_kinds",
        "global_config",
        "judge",
        "mcp_auto_exposure",
        "openai_utils",
        "path_utils",
        "prompt",
        "reward_profile",
        "rollout_collection",
        "responses_converter",
        "rollout_correlation",
        "rollout_observability",
        "sandbox",
        "sandbox.agent_tools",
        "sandbox.config",
        "server_utils",
        "skills",
        "task_data",
        "testing",
        "testing.session_conformance",
        "tool_access",
        "verifier_fixture",
    }
)
"""The NeMo Gym modules we stand in for; any other `nemo_gym.X` is "No module named" (a clear
reason in a report: that server needs a part of NeMo Gym we do not offer, such as its sandbox)."""
_PACKAGES = frozenset({"sandbox", "testing"})
"""Stand-ins that are packages (their submodules are stand-ins too)."""


class _AliasLoader(importlib.abc.Loader):
    """Hands out an already-imported stand-in module under its `nemo_gym` name."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the stand-in ran when it was imported under its own name."""


class NemoGymFinder(importlib.abc.MetaPathFinder):
    """`nemo_gym` -> `ng_cli.nemo_gym_compat.api`, `nemo_gym.X` -> `...api.X` for X in STAND_INS.

    `modules` answers more names, or other modules for some (a trainer's process gets NeMo Gym's
    trainer-facing `cli` and `rollout_collection` from `ng_cli.trainer_api`)."""

    def __init__(self, modules: Mapping[str, str] | None = None) -> None:
        self.modules = {name: f"{_API}.{name}" for name in STAND_INS} | dict(modules or {})

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == PACKAGE:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(_API), is_package=True)
        head, _, rest = fullname.partition(".")
        stand_in = self.modules.get(rest) if head == PACKAGE else None
        if stand_in is None:
            return None
        is_package = rest in _PACKAGES
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(stand_in), is_package=is_package)


_FINDER = NemoGymFinder()


def installed() -> bool:
    return _FINDER in sys.meta_path


def real_nemo_gym_origin(roots: Iterable[Path] = ()) -> str | None:
    """Where an installed NeMo Gym lives, or None when there is none.

    Installed means: a `nemo_gym` distribution (pip, editable included), or a `nemo_gym` package
    importable from `sys.path` outside `roots` and the working directory. NeMo Gym's own source
    folder at the root a server is served from is not an installation: running from NeMo Gym's
    root is how its servers are run here, and that folder cannot import without NeMo Gym's
    dependencies (ray, wandb, ...)."""
    for distribution in ("nemo-gym", "nemo_gym"):
        try:
            found = importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
        return str(found.locate_file(PACKAGE))
    skipped = {_resolved(root) for root in (*roots, Path.cwd())}
    search = [entry for entry in sys.path if _resolved(Path(entry or ".")) not in skipped]
    spec = importlib.machinery.PathFinder.find_spec(PACKAGE, search)
    return None if spec is None else (spec.origin or "namespace package")


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


def install(roots: Iterable[Path] = ()) -> bool:
    """Answer `import nemo_gym...` with our stand-ins, unless a real NeMo Gym is installed.

    `roots`: NeMo Gym roots being served from (their `nemo_gym/` folder is not an installation).
    Returns whether our stand-ins now answer (False: the real package does)."""
    if installed():
        return True
    if real_nemo_gym_origin(roots) is not None:
        return False
    sys.meta_path.insert(0, _FINDER)
    for root in roots:  # `from nemo_gym import PARENT_DIR`: the root being served from
        api = importlib.import_module(_API)  # standard library only
        setattr(api, "PARENT_DIR", Path(root))  # noqa: B010 - a module's attribute, set by name
        setattr(api, "CACHE_DIR", Path(root) / "cache")  # noqa: B010
        break
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]  # a half-imported source tree of NeMo Gym must not answer
    return True


def uninstall() -> None:
    """Take the finder out and forget the aliases (tests)."""
    if installed():
        sys.meta_path.remove(_FINDER)
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        module = sys.modules[name]
        if module.__name__.startswith(_API):
            del sys.modules[name]
