"""NeMo Gym's config directives: `_inherit_from`, `_copy` and `_delete_key`, with its semantics.

Applied to the merged tree (files < env.yaml < command line) before `${...}` is resolved, the
way NeMo Gym's `global_config.py` applies them:

    name: {_inherit_from: other.path, key: v}   the value at other.path, with these keys over it;
                                                other.path itself is removed (a move)
    name: {_copy: other.path, key: v}           the same, but other.path stays
    name: "${inherit_from:other.path}"          / "${copy:other.path}": the value as it is
    name: {_delete_key: "a, b", ...}            drop keys a and b (after inheriting, if both)

A directive reads the value at its path with that value's own directives applied, so a chain
(`a` copies `b`, which inherits from `c`) ends with every link's keys; NeMo Gym reads the tree as
it was before any directive ran and leaves such chains half-done (a TODO in its
`_recursively_swap_keys_helper`). Moves are made once every value is known, so the order of keys
does not matter and several directives may name the same source. A path that is not in the
tree, a cycle (`a` copies `b`, which copies `a`; or a block that names itself or its parent) and
a chain longer than `MAX_CHAIN` are config errors naming each directive's file and line. The
keys a directive brings in keep the "file:line" where they were written, so later errors still
point at the real line.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf

from ng_cli.config.sources import Sources, join_key, lookup_key
from ng_cli.errors import ConfigError

__all__ = ["DIRECTIVE_KEYS", "MAX_CHAIN", "apply_directives"]

INHERIT_KEY = "_inherit_from"
COPY_KEY = "_copy"
DELETE_KEY = "_delete_key"
DIRECTIVE_KEYS = (INHERIT_KEY, COPY_KEY, DELETE_KEY)
MAX_CHAIN = 100
"""Most directives one value may pass through (`a` copies `b`, which copies `c`, ...)."""
_STRING_FORMS = (("${inherit_from:", INHERIT_KEY), ("${copy:", COPY_KEY))
_MISSING = object()


def apply_directives(tree: dict[str, Any], sources: Sources) -> tuple[dict[str, Any], Sources]:
    """The tree with every directive applied, and sources that follow the keys they moved."""
    if not _has_directive(tree):
        return tree, sources
    resolver = _Resolver(tree, sources)
    resolved = resolver.value(tree, "")
    for target in resolver.moved:
        _remove(resolved, target)
    return resolved, Sources.from_layers([resolver.brought, sources])


@dataclass(frozen=True)
class _Link:
    """One directive being applied: at `path`, of `kind`, naming `target`, written at `origin`."""

    path: str
    kind: str
    target: str
    origin: str | None

    def __str__(self) -> str:
        where = f" ({self.origin})" if self.origin else ""
        return f"{self.path}.{self.kind}: {self.target}{where}"


class _Resolver:
    """Resolves the tree depth-first; a directive's target is resolved (memoised) before it."""

    def __init__(self, frozen: dict[str, Any], sources: Sources) -> None:
        self.frozen = frozen
        self.sources = sources
        self.brought: dict[str, str] = {}
        """Dotted key -> origin of every key a directive brought in (chains included)."""
        self.moved: list[str] = []
        """The `_inherit_from` targets, removed once everything is resolved."""
        self._done: dict[str, Any] = {}
        self._active: list[_Link] = []

    def value(self, raw: Any, path: str) -> Any:
        """`raw` (the value written at `path`) with every directive in it applied."""
        if path in self._done:
            return copy.deepcopy(self._done[path])
        directive = _directive(raw)
        if directive is not None:
            resolved = self._apply(raw, path, *directive)
        elif isinstance(raw, dict):
            block = dict(raw)
            # a key to delete that is not here is let be, as NeMo Gym's `_recursively_swap_keys_helper`
            # lets it be (it may be written for a block that another file completes); only a
            # block's _inherit_from / _copy must bring each key it deletes
            _pop_delete(block, path, self.sources)
            resolved = {key: self.value(child, join_key(path, key)) for key, child in block.items()}
        elif isinstance(raw, list):
            resolved = [self.value(child, join_key(path, index)) for index, child in enumerate(raw)]
        else:
            return raw
        self._done[path] = resolved
        return copy.deepcopy(resolved)

    def _apply(self, raw: Any, path: str, kind: str, target: Any) -> Any:
        link = _Link(
            path, kind, target, self.sources.lookup(join_key(path, kind) if isinstance(raw, dict) else path)
        )
        where = f"{link.origin}  " if link.origin else ""
        if not isinstance(target, str) or not target:
            raise ConfigError(
                f"{where}{path}.{kind}: expected a dotted path such as policy_model, got {target!r}"
            )
        self._check_chain(link)
        self._active.append(link)
        try:
            found = self._at(target)
        finally:
            self._active.pop()
        if found is _MISSING:
            raise ConfigError(
                f"{where}{path}: {kind} names '{target}', which is not in the composed config",
                hint="the path is dotted from the top of the tree, e.g. my_agent.responses_api_agents.simple_agent",
            )
        if kind == INHERIT_KEY:
            self.moved.append(target)  # a move; several may name the same source
        for key, origin in list(self._under(target)):
            self.brought[path + key[len(target) :]] = origin
        if not isinstance(raw, dict):
            return found
        if not isinstance(found, dict):
            raise ConfigError(
                f"{where}{path}: {kind} '{target}' is not a mapping, so keys cannot be added to it"
            )
        block = {key: child for key, child in raw.items() if key != kind}
        leftover = _pop_delete(block, path, self.sources)
        local = {key: self.value(child, join_key(path, key)) for key, child in block.items()}
        merged = OmegaConf.to_container(OmegaConf.merge(found, local), resolve=False)
        assert isinstance(merged, dict)
        self._delete(merged, leftover, path)
        return merged

    def _check_chain(self, link: _Link) -> None:
        """ConfigError if `link` is already being applied (a cycle) or the chain is too long."""
        first = self._active[0] if self._active else link
        where = f"{first.origin}  " if first.origin else ""
        for index, active in enumerate(self._active):
            if active.path == link.path:
                chain = " -> ".join(str(each) for each in self._active[index:])
                raise ConfigError(
                    f"{where}{first.path}.{first.kind}: the directives form a cycle: {chain} -> {link.path}",
                    hint="a value cannot be copied or inherited from itself, its own block or a block that names it",
                )
        if len(self._active) >= MAX_CHAIN:
            raise ConfigError(
                f"{where}{first.path}.{first.kind}: a chain of more than {MAX_CHAIN} directives "
                f"({first} -> {self._active[1]} -> ... -> {link})",
                hint="name the block the chain ends at directly",
            )

    def _at(self, target: str) -> Any:
        """The resolved value at a dotted path: the first directive on the way is applied first."""
        node: Any = self.frozen
        path = ""
        parts = target.split(".")
        for depth, part in enumerate(parts):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return _MISSING
            path = join_key(path, part)
            if _directive(node) is not None and depth < len(parts) - 1:
                return lookup_key(self.value(node, path), ".".join(parts[depth + 1 :]), _MISSING)
        return self.value(node, path)

    def _under(self, dotted: str) -> Iterator[tuple[str, str]]:
        """Origins of the keys under `dotted`: written there, else brought there by a directive."""
        prefix = dotted + "."
        for key, origin in self.brought.items():
            if key.startswith(prefix) and key not in self.sources:
                yield key, origin
        for key in self.sources:
            if key.startswith(prefix):
                yield key, self.sources[key]

    def _delete(self, block: Any, names: list[str], path: str) -> None:
        for name in names:
            if not isinstance(block, dict) or name not in block:
                raise ConfigError(
                    f"{_at(self.sources, join_key(path, DELETE_KEY))}{path}.{DELETE_KEY}: no key '{name}' to delete",
                    hint="_delete_key removes keys of its own block only (after that block's _inherit_from or _copy)",
                )
            del block[name]


def _pop_delete(block: dict[str, Any], dotted: str, sources: Sources) -> list[str]:
    """Delete the listed keys present now; return those still to delete after inheriting."""
    if DELETE_KEY not in block:
        return []
    raw = block.pop(DELETE_KEY)
    if not isinstance(raw, str):
        raise ConfigError(
            f"{_at(sources, join_key(dotted, DELETE_KEY))}{dotted}.{DELETE_KEY}: expected a comma-separated "
            f"string of keys, got {raw!r}"
        )
    names = {name.strip() for name in raw.split(",") if name.strip()}
    for name in [name for name in names if name in block]:
        del block[name]
        names.discard(name)
    return sorted(names)


def _directive(value: Any) -> tuple[str, Any] | None:
    if isinstance(value, str):
        for prefix, kind in _STRING_FORMS:
            if value.startswith(prefix) and value.endswith("}"):
                return kind, value[len(prefix) : -1]
        return None
    if isinstance(value, dict):
        for kind in (INHERIT_KEY, COPY_KEY):
            if kind in value:
                return kind, value[kind]
    return None


def _remove(tree: dict[str, Any], dotted: str) -> None:
    *parents, last = dotted.split(".")
    parent = lookup_key(tree, ".".join(parents), _MISSING) if parents else tree
    if isinstance(parent, dict):
        parent.pop(last, None)


def _has_directive(node: Any) -> bool:
    if _directive(node) is not None:
        return True
    if isinstance(node, dict):
        return DELETE_KEY in node or any(_has_directive(child) for child in node.values())
    if isinstance(node, list):
        return any(_has_directive(child) for child in node)
    return False


def _at(sources: Sources, key: str) -> str:
    origin = sources.lookup(key)
    return f"{origin}  " if origin else ""
