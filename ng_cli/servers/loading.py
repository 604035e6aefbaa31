"""Find the server class an implementation's `app.py` defines, by path, without a package import.

Only the child process (and tests) import an `app.py`; the launcher never does, so one broken
environment cannot take the parent down.

An `app.py` written for NeMo Gym (it imports `nemo_gym`) is loaded with NeMo Gym's import names
answered by `ng_cli.nemo_gym_compat` (unless a real `nemo_gym` is installed), under its NeMo Gym
module name (`resources_servers.<name>.app`, NeMo Gym's root first on `sys.path`, as its sibling
modules import it), and served by the class its `__ng_server_class__` names.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType

from ng_cli.errors import ConfigError
from ng_cli.servers.base import BaseServer

__all__ = ["imports_nemo_gym", "load_server_class"]

_NEMO_GYM_IMPORT = re.compile(r"^\s*(from|import)\s+nemo_gym\b", re.MULTILINE)


def imports_nemo_gym(app_path: Path) -> bool:
    """Whether the file imports NeMo Gym's package (then it is one of NeMo Gym's servers)."""
    try:
        return _NEMO_GYM_IMPORT.search(app_path.read_text(encoding="utf-8", errors="replace")) is not None
    except OSError:
        return False


def load_server_class(app_path: Path) -> type[BaseServer]:  # type: ignore[type-arg]
    """Import `app_path` and return the one concrete server class it defines."""
    if not app_path.is_file():
        raise ConfigError(f"entrypoint {app_path} does not exist")
    nemo_gym = imports_nemo_gym(app_path)
    if nemo_gym:
        from ng_cli.servers import nemo_gym_finder as finder

        root = app_path.resolve().parent.parent.parent  # NeMo Gym's root
        finder.install([root])
        module_name = f"{app_path.parent.parent.name}.{app_path.parent.name}.{app_path.stem}"
        sys.path.insert(0, str(root))
        _import_package_first(module_name.rpartition(".")[0])
    else:
        module_name = f"ng_app_{app_path.parent.parent.name}_{app_path.parent.name}_{app_path.stem}"
    sys.path.insert(0, str(app_path.parent))  # lets app.py import modules next to it
    module = _import(module_name, app_path)
    classes = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, BaseServer)
        and obj.__module__ == module_name
        and not inspect.isabstract(obj)
    ]
    if not classes and nemo_gym:
        return _nemo_gym_server_class(module, module_name, app_path)
    if len(classes) != 1:
        found = ", ".join(c.__name__ for c in classes) or "none"
        raise ConfigError(
            f"{app_path} must define exactly one server class (a subclass of ResourcesServer, "
            f"ModelServer or AgentServer); found {found}"
        )
    return classes[0]


def _import_package_first(package: str) -> None:
    """Import the server's package before its app.py, as Python's own import of `<package>.app`
    does: a package `__init__` that imports the app (osworld's does) then loads it whole, instead
    of meeting the half-run module ours registered ("cannot import name ... from ...app"). A
    package that fails to import is left to fail again, with its real error, through app.py."""
    with contextlib.suppress(Exception):
        importlib.import_module(package)


def _import(module_name: str, app_path: Path) -> ModuleType:
    existing = sys.modules.get(module_name)
    if existing is not None and Path(getattr(existing, "__file__", "") or "").resolve() == app_path.resolve():
        return existing
    spec = importlib.util.spec_from_file_location(module_name, app_path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{app_path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def _nemo_gym_server_class(module: ModuleType, module_name: str, app_path: Path) -> type[BaseServer]:  # type: ignore[type-arg]
    """The class serving the NeMo Gym server the module defines (the most derived one)."""
    candidates = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and obj.__module__ == module_name and not inspect.isabstract(obj)
    ]
    servers = [obj for obj in candidates if callable(getattr(obj, "__ng_server_class__", None))]
    leaves = [
        obj for obj in servers if not any(other is not obj and issubclass(other, obj) for other in servers)
    ]
    if len(leaves) == 1:
        served: type[BaseServer] = leaves[0].__ng_server_class__()  # type: ignore[type-arg,attr-defined]
        return served
    from ng_cli.servers import nemo_gym_finder as finder

    origin = finder.real_nemo_gym_origin([app_path.resolve().parent.parent.parent])
    if origin is not None:
        raise ConfigError(
            f"{app_path} imports the installed NeMo Gym ({origin}); ng_cli stands aside for a real "
            "nemo_gym, so this server is NeMo Gym's to run",
            hint="run it in an environment without the nemo_gym package to serve it with ng_cli",
        )
    found = ", ".join(c.__name__ for c in leaves) or "none"
    raise ConfigError(
        f"{app_path} must define exactly one NeMo Gym resources server class (a subclass of "
        f"SimpleResourcesServer); found {found}"
    )
