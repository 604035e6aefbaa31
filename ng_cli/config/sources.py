"""Provenance of composed config values: dotted key -> the "file:line" that set it.

Every layer (a YAML file, env.yaml, the command line) records the keys it sets. A key set by
several layers keeps all its origins, oldest first: the newest one says where the value came
from, the oldest one where the thing was defined (used for server instances). Keys are dotted
paths with list indices as plain parts (`a.b.0.c`), the same form `ComposedConfig.get` takes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["COMMAND_LINE", "Sources", "join_key", "lookup_key", "normalize_key"]

COMMAND_LINE = "<command line>"
"""The origin recorded for values given as command-line overrides."""

_INDEX = re.compile(r"\[(\d+)\]")


def join_key(prefix: str, key: object) -> str:
    """Append one part to a dotted key."""
    return f"{prefix}.{key}" if prefix else str(key)


def lookup_key(tree: Any, dotted: str, default: Any = None) -> Any:
    """The value at a dotted key (`a.b.0.c`) of plain dicts and lists, or `default` when any part is absent."""
    node = tree
    for part in dotted.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return default
    return node


def normalize_key(full_key: str) -> str:
    """Turn OmegaConf's `a.b[0].c` form into the dotted `a.b.0.c` form used here."""
    return _INDEX.sub(r".\1", full_key).lstrip(".")


class Sources(Mapping[str, str]):
    """Read-only map of dotted key -> newest origin, with the full history kept per key."""

    def __init__(self, origins: Mapping[str, Iterable[str]] | None = None) -> None:
        self._origins: dict[str, tuple[str, ...]] = {
            key: tuple(values) for key, values in (origins or {}).items() if values
        }

    @classmethod
    def from_layers(cls, layers: Iterable[Mapping[str, str]]) -> Sources:
        """Combine per-layer maps (oldest layer first) into one history per key."""
        history: dict[str, list[str]] = {}
        for layer in layers:
            for key, origin in layer.items():
                history.setdefault(key, []).append(origin)
        return cls(history)

    def __getitem__(self, key: str) -> str:
        return self._origins[key][-1]

    def __iter__(self) -> Iterator[str]:
        return iter(self._origins)

    def __len__(self) -> int:
        return len(self._origins)

    def __repr__(self) -> str:
        return f"Sources({len(self)} keys)"

    def origins(self, key: str) -> tuple[str, ...]:
        """Every origin of exactly this key, oldest first."""
        return self._origins.get(key, ())

    def lookup(self, key: str) -> str | None:
        """Newest origin of the key, or of its nearest ancestor that has one."""
        found = self._nearest(key)
        return found[-1] if found else None

    def first(self, key: str) -> str | None:
        """Oldest origin of the key (or nearest ancestor): where it was first defined."""
        found = self._nearest(key)
        return found[0] if found else None

    def restricted_to(self, keep: Iterable[str]) -> Sources:
        """Only the given keys (those that survived merging and deletion)."""
        wanted = set(keep)
        return Sources({key: values for key, values in self._origins.items() if key in wanted})

    def _nearest(self, key: str) -> tuple[str, ...]:
        parts = key.split(".")
        while parts:
            found = self._origins.get(".".join(parts))
            if found:
                return found
            parts.pop()
        return ()
