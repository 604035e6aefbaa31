"""NeMo Gym's config directives: `_inherit_from`, `_copy` and `_delete_key`, with its semantics.

Applied to the merged tree (files < env.yaml < command line) before `${...}` is resolved, the
way NeMo Gym's `global_config.py` applies them:

    name: {_inherit_from: other.path, key: v}   the value at other.path, with these keys over it;
                                                other.path itself is removed (a move)
    name: {_copy: other.path, key: v}           the same, but other.path stays
    name: "${inherit_from:other.path}"          / "${copy:other.path}": the value as it is
    name: {_delete_key: "a, b", ...}            drop keys a and b (after inheriting, if both)

Children are handled before their parent; every directive reads the tree as it was before any
directive ran, so the order of keys does not matter. A path that is not in the tree is a
config error naming the directive's file and line. The keys a directive brings in keep the
"file:line" where they were written, so later errors still point at the real line.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from omegaconf import OmegaConf

from ng_cli.config.sources import Sources, join_key, lookup_key
from ng_cli.errors import ConfigError

__all__ = ["DIRECTIVE_KEYS", "apply_directives"]

INHERIT_KEY = "_inherit_from"
COPY_KEY = "_copy"
DELETE_KEY = "_delete_key"
DIRECTIVE_KEYS = (INHERIT_KEY, COPY_KEY, DELETE_KEY)
_STRING_FORMS = (("${inherit_from:", INHERIT_KEY), ("${copy:", COPY_KEY))
_MISSING = object()


def apply_directives(tree: dict[str, Any], sources: Sources) -> tuple[dict[str, Any], Sources]:
    """The tree with every directive applied, and sources that follow the keys they moved."""
    if not _has_directive(tree):
        return tree, sources
    live = copy.deepcopy(tree)
    brought: dict[str, str] = {}
    _walk(live, "", live, tree, sources, brought)
    return live, Sources.from_layers([brought, sources])


def _walk(
    node: dict[str, Any] | list[Any],
    path: str,
    root: dict[str, Any],
    frozen: dict[str, Any],
    sources: Sources,
    brought: dict[str, str],
) -> None:
    items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
    for key, value in items:
        dotted = join_key(path, key)
        to_delete = _pop_delete(value, dotted, sources) if isinstance(value, dict) else []
        if isinstance(value, dict | list):
            _walk(value, dotted, root, frozen, sources, brought)
        directive = _directive(value)
        if directive is not None:
            kind, target = directive
            value = _resolve(kind, target, value, dotted, root, frozen, sources, brought)
            node[key] = value  # type: ignore[index]
        for name in to_delete:
            if not isinstance(value, dict) or name not in value:
                raise ConfigError(
                    f"{_at(sources, join_key(dotted, DELETE_KEY))}{dotted}.{DELETE_KEY}: no key '{name}' to delete",
                    hint="_delete_key removes keys of its own block only (after that block's _inherit_from or _copy)",
                )
            del value[name]


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


def _directive(value: Any) -> tuple[str, str] | None:
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


def _resolve(
    kind: str,
    target: Any,
    value: Any,
    dotted: str,
    root: dict[str, Any],
    frozen: dict[str, Any],
    sources: Sources,
    brought: dict[str, str],
) -> Any:
    where = _at(sources, join_key(dotted, kind) if isinstance(value, dict) else dotted)
    if not isinstance(target, str) or not target:
        raise ConfigError(
            f"{where}{dotted}.{kind}: expected a dotted path such as policy_model, got {target!r}"
        )
    found = lookup_key(frozen, target, _MISSING)
    if found is _MISSING:
        raise ConfigError(
            f"{where}{dotted}: {kind} names '{target}', which is not in the composed config",
            hint="the path is dotted from the top of the tree, e.g. my_agent.responses_api_agents.simple_agent",
        )
    if kind == INHERIT_KEY:
        _remove(root, target)  # a move; several may name the same source
    for key, origin in _under(sources, target):
        brought[dotted + key[len(target) :]] = origin
    inherited = copy.deepcopy(found)
    if not isinstance(value, dict):
        return inherited
    local = {key: child for key, child in value.items() if key != kind}
    if not isinstance(inherited, dict):
        raise ConfigError(
            f"{where}{dotted}: {kind} '{target}' is not a mapping, so keys cannot be added to it"
        )
    merged = OmegaConf.to_container(OmegaConf.merge(inherited, local), resolve=False)
    assert isinstance(merged, dict)
    return merged


def _remove(tree: dict[str, Any], dotted: str) -> None:
    *parents, last = dotted.split(".")
    parent = lookup_key(tree, ".".join(parents), _MISSING) if parents else tree
    if isinstance(parent, dict):
        parent.pop(last, None)


def _under(sources: Sources, dotted: str) -> Iterator[tuple[str, str]]:
    prefix = dotted + "."
    for key in sources:
        if key.startswith(prefix):
            yield key, sources[key]


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
