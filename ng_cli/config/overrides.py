"""Command-line overrides: Hydra's override grammar, applied to the composed tree with OmegaConf.

This and `compose.py` are the only modules that touch Hydra. The grammar is Hydra's own parser
(quoting, lists, dicts, `${...}` values); the semantics follow NeMo Gym rather than strict Hydra,
because that is what users of the existing configs type:

    key=value     change a key that exists; a typo is an error that suggests the closest key
    +key=value    add the key, or override it if a file already set it (NeMo Gym applies the
                  command line to an empty config, so `+` never conflicts there; strict Hydra
                  would refuse `+` on an existing key)
    ++key=value   add or override (same as `+` here)
    ~key          delete the key; `~key=value` only if it currently holds that value

Two keys are read before any file is loaded and never land in the tree as typed:
`config_paths` (several overrides of it are concatenated in order, so `-c a.yaml` can join a
typed `+config_paths=[b.yaml]`) and `dotenv_path` (another env.yaml, as in NeMo Gym).
Sweeps (`key=a,b`) and package overrides (`key@pkg=...`) mean nothing here and are refused.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, Override
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, Node, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ng_cli.config.fragments import CONFIG_PATHS_KEY, Include, parse_config_paths
from ng_cli.config.secrets import MASK, is_secret_key
from ng_cli.config.sources import COMMAND_LINE, join_key
from ng_cli.errors import ConfigError

__all__ = ["DOTENV_PATH_KEY", "CommandLine", "apply_overrides", "parse_overrides"]

DOTENV_PATH_KEY = "dotenv_path"
"""Reserved key naming another env.yaml (NeMo Gym's name for it)."""

_GRAMMAR_URL = "https://hydra.cc/docs/advanced/override_grammar/basic/"


@dataclass(frozen=True)
class CommandLine:
    """The overrides, split into what selects files and what edits the tree."""

    config_paths: tuple[Include, ...]
    dotenv_path: str | None
    edits: tuple[Override, ...]


def parse_overrides(overrides: Sequence[str]) -> CommandLine:
    """Parse every override with Hydra's grammar; refuse the forms that have no meaning here."""
    parser = OverridesParser.create()
    config_paths: list[Include] = []
    dotenv_path: str | None = None
    edits: list[Override] = []
    for line in overrides:
        override = _parse_one(parser, line)
        key = override.key_or_group
        if key == CONFIG_PATHS_KEY or key.startswith(f"{CONFIG_PATHS_KEY}."):
            config_paths.extend(Include(raw, COMMAND_LINE) for raw in _config_paths_value(override))
        elif key == DOTENV_PATH_KEY and not override.is_delete():
            dotenv_path = str(override.value())
        else:
            edits.append(override)
    return CommandLine(tuple(config_paths), dotenv_path, tuple(edits))


def apply_overrides(cfg: DictConfig, edits: Sequence[Override]) -> dict[str, str]:
    """Apply the edits in order to `cfg`; return the keys they set, all from the command line."""
    origins: dict[str, str] = {}
    for override in edits:
        key = override.key_or_group
        line = _shown(override.input_line or key)
        try:
            if override.is_delete():
                _delete(cfg, key, override.value(), line)
                continue
            value = override.value()
            if not override.is_add() and not override.is_force_add():
                _require_existing(cfg, key, line)
            origins.update(_new_ancestors(cfg, key))
            OmegaConf.update(cfg, key, value, merge=True, force_add=True)
        except OmegaConfBaseException as exc:
            raise ConfigError(f"{COMMAND_LINE}  cannot apply override '{line}': {exc.msg or exc}") from exc
        origins[key] = COMMAND_LINE
        origins.update({nested: COMMAND_LINE for nested in _nested_keys(key, value)})
    return origins


def _parse_one(parser: OverridesParser, line: str) -> Override:
    try:
        override = parser.parse_override(line)
    except HydraException as exc:
        shown = _shown(line)
        detail = str(exc).split("\nSee https://")[0] if shown == line else "invalid syntax (value hidden)"
        raise ConfigError(
            f"{COMMAND_LINE}  cannot parse override '{shown}': {detail}",
            hint=f"overrides use Hydra's grammar ({_GRAMMAR_URL}); quote values with "
            "special characters, e.g. 'key=\"a b,c\"'",
        ) from exc
    except RecursionError:  # Hydra's parser recurses once per bracket level
        raise ConfigError(
            f"{COMMAND_LINE}  override '{_shown(line)[:80]}...': nested too deeply to parse",
            hint="put deeply nested values in a YAML file and pass it with -c",
        ) from None
    if override.package is not None:
        raise ConfigError(
            f"{COMMAND_LINE}  override '{_shown(line)}': package overrides (@) are not supported"
        )
    if override.is_sweep_override() and override.key_or_group != CONFIG_PATHS_KEY:
        raise ConfigError(
            f"{COMMAND_LINE}  override '{_shown(line)}' has several values (a Hydra sweep)",
            hint=f'quote it for one string ({override.key_or_group}="a,b") '
            f"or use brackets for a list ({override.key_or_group}=[a,b])",
        )
    return override


def _config_paths_value(override: Override) -> list[str]:
    line = override.input_line or CONFIG_PATHS_KEY
    if override.is_delete() or override.key_or_group != CONFIG_PATHS_KEY:
        raise ConfigError(
            f"{COMMAND_LINE}  override '{line}': {CONFIG_PATHS_KEY} can only be given as a whole list",
            hint='write "+config_paths=[a.yaml,b.yaml]"',
        )
    value = override.value()
    if isinstance(value, ChoiceSweep) and value.simple_form:  # +config_paths=a.yaml,b.yaml
        value = [str(item) for item in value.list]
    return parse_config_paths(value, origin=COMMAND_LINE)


def _shown(line: str) -> str:
    """The override as typed, with the value hidden when the key looks secret."""
    key, sep, _ = line.partition("=")
    return f"{key}{sep}{MASK}" if sep and is_secret_key(key.lstrip("+~").rpartition(".")[2]) else line


def _node(cfg: DictConfig, key: str) -> Node | None:
    """The node at a dotted key without resolving anything (a `???` value exists), or None."""
    node: Node | None = cfg
    for part in key.split("."):
        if isinstance(node, DictConfig):
            node = node._get_node(part)
        elif isinstance(node, ListConfig) and part.isdigit() and int(part) < len(node):
            # omegaconf types ListConfig._get_node as possibly a list, which only a slice key returns
            node = node._get_node(int(part))  # type: ignore[assignment]
        else:
            return None
        if node is None:
            return None
    return node


def _delete(cfg: DictConfig, key: str, expected: Any, line: str) -> None:
    if _node(cfg, key) is None:
        raise ConfigError(
            f"{COMMAND_LINE}  cannot delete '{key}' ({line}): no such key", hint=_suggest(cfg, key)
        )
    current = OmegaConf.select(cfg, key, throw_on_missing=False, throw_on_resolution_failure=False)
    if expected is not None and current != expected:
        shown = MASK if is_secret_key(key.rpartition(".")[2]) else repr(current)
        raise ConfigError(
            f"{COMMAND_LINE}  cannot delete '{key}' ({line}): its value is {shown}, not the one given"
        )
    parent_key, _, last = key.rpartition(".")
    parent = OmegaConf.select(cfg, parent_key) if parent_key else cfg
    if isinstance(parent, ListConfig):
        del parent[int(last)]
    else:
        parent.pop(last)


def _require_existing(cfg: DictConfig, key: str, line: str) -> None:
    if _node(cfg, key) is not None:
        return
    suggestion = _suggest(cfg, key)
    raise ConfigError(
        f"{COMMAND_LINE}  cannot override '{key}' ({line}): no such key in the composed config",
        hint=(suggestion + "; " if suggestion else "") + f"to add a new key write +{line}",
    )


def _suggest(cfg: DictConfig, key: str) -> str | None:
    """Did-you-mean for the first part of `key` that does not exist."""
    parts = key.split(".")
    node: Any = cfg
    for depth, part in enumerate(parts):
        if not isinstance(node, DictConfig):
            return None
        if node._get_node(part) is None:
            siblings = [str(name) for name in node]
            close = difflib.get_close_matches(part, siblings, n=1)
            return f"did you mean '{'.'.join([*parts[:depth], close[0]])}'?" if close else None
        node = node._get_node(part)
    return None


def _new_ancestors(cfg: DictConfig, key: str) -> dict[str, str]:
    """Ancestors the override is about to create: they come from the command line too."""
    parts = key.split(".")
    created: dict[str, str] = {}
    for depth in range(1, len(parts)):
        prefix = ".".join(parts[:depth])
        if created or _node(cfg, prefix) is None:
            created[prefix] = COMMAND_LINE
    return created


def _nested_keys(prefix: str, value: Any) -> list[str]:
    if isinstance(value, dict):
        items: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return []
    keys: list[str] = []
    for name, child in items:
        dotted = join_key(prefix, name)
        keys.append(dotted)
        keys.extend(_nested_keys(dotted, child))
    return keys
