"""Lazy package exports: a package names what it offers, and each name's module loads on first use.

    __getattr__ = lazy_exports(__name__, {"compose_config": "compose", ...})

so importing a light submodule (`ng_cli.config.schema`, `ng_cli.servers.http`) does not pay for
its package's heavy ones (Hydra, FastAPI).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: `name` is imported from `package.<homes[name]>`."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    return __getattr__
