"""Composing one config tree: YAML fragments, then env.yaml, then command-line overrides.

    files in config_paths (depth-first; a file's includes merge before it; each file once)
      < env.yaml (`+dotenv_path=...`, `$NG_ENV_YAML`, else the cwd's, else the repo root's)
      < a program's values (NeMo Gym's `initial_global_config_dict`: `values=`)
      < command-line overrides (Hydra grammar; the command line always wins)
      -> NeMo Gym's `_inherit_from` / `_copy` / `_delete_key` (`directives.py`)
      -> `${...}` resolved against the root -> server instances found and checked

`config_paths` comes from the command line, else the values, else env.yaml (NeMo Gym's rule). Paths are tried relative to the cwd first, then the repo root. Every key
keeps the "file:line" it came from (`ComposedConfig.sources`), so every error can point there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ng_cli.config.directives import apply_directives
from ng_cli.config.environments import EnvironmentRelay, find_environment_relays
from ng_cli.config.fragments import (
    CONFIG_PATHS_KEY,
    Include,
    collect_fragments,
    load_fragment,
    parse_config_paths,
)
from ng_cli.config.instances import ServerInstance, check_references, find_instances
from ng_cli.config.overrides import DOTENV_PATH_KEY, apply_overrides, parse_overrides
from ng_cli.config.paths import env_yaml_path, resolve_config_path
from ng_cli.config.resolve import resolve_tree
from ng_cli.config.sources import COMMAND_LINE, Sources, join_key, lookup_key, normalize_key
from ng_cli.errors import ConfigError

__all__ = ["POLICY_KEYS", "VALUES_ORIGIN", "ComposedConfig", "compose_config", "compose_tree"]

VALUES_ORIGIN = "<initial_global_config_dict>"
"""Where a key of `compose_config`'s `values` came from, in messages (NeMo Gym's name for them)."""
POLICY_KEYS = frozenset({"policy_base_url", "policy_api_key", "policy_model_name"})
"""NeMo Gym's values for the policy model's config: a program sets them as env.yaml does (TRL's
and NeMo RL's start dicts always do), so in `values` they are never unknown options."""


class _Layer(Protocol):
    """What merging reads of a layer: a file (`Fragment`) or a program's values (`_Values`)."""

    @property
    def name(self) -> str: ...

    @property
    def data(self) -> dict[str, Any]: ...

    @property
    def sources(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class _Values:
    """A program's values as one layer: every key's origin is `name`."""

    name: str
    data: dict[str, Any]
    sources: dict[str, str]
    includes: tuple[Include, ...]

    @classmethod
    def of(cls, values: Mapping[str, Any], origin: str) -> _Values:
        data = {str(key): value for key, value in values.items() if key != CONFIG_PATHS_KEY}
        paths = parse_config_paths(values.get(CONFIG_PATHS_KEY), origin=origin)
        sources = {dotted: origin for dotted in _dotted_keys(data, "")}
        return cls(origin, data, sources, tuple(Include(path, origin) for path in paths))


@dataclass(frozen=True)
class ComposedConfig:
    """The resolved config tree, its server instances, and where every key came from."""

    tree: dict[str, Any]
    """Fully resolved plain dicts and lists (secrets included: mask before showing it)."""
    instances: dict[str, ServerInstance]
    """Server instances by name, in tree order."""
    sources: Sources
    """Dotted key -> "file:line" (or "<command line>")."""
    free_keys: frozenset[str] = frozenset()
    """Top-level keys that are values for others, not options: set in env.yaml, or read by a
    `${...}` interpolation. A command never calls them unknown (see `command_options`)."""
    relays: dict[str, EnvironmentRelay] = field(default_factory=dict)
    """NeMo Gym `environment_servers` (legacy_agent) by name: each is served by the agent it names."""

    def get(self, dotted: str, default: Any = None) -> Any:
        """The value at a dotted key (`a.b.0.c`), or `default` when any part is absent."""
        return lookup_key(self.tree, dotted, default)


def compose_config(
    overrides: Sequence[str],
    *,
    cwd: Path | None = None,
    values: Mapping[str, Any] | None = None,
    values_origin: str = VALUES_ORIGIN,
    read_env_yaml: bool = True,
) -> ComposedConfig:
    """Merge files < env.yaml < values < overrides, resolve, and check the server instances.

    `values`: a program's config on top of the files and env.yaml, its `config_paths` included
    (NeMo Gym's `initial_global_config_dict`); `read_env_yaml=False` leaves env.yaml out."""
    cwd = (cwd or Path.cwd()).resolve()
    command_line = parse_overrides(overrides)
    env_path = _env_yaml(command_line.dotenv_path, cwd) if read_env_yaml else cwd / "env.yaml"
    env = load_fragment(env_path) if read_env_yaml and env_path.is_file() else None
    given = _Values.of(values, values_origin) if values is not None else None
    includes = command_line.config_paths or (given.includes if given else ()) or (env.includes if env else ())
    fragments = collect_fragments(includes, cwd=cwd)
    layers: list[_Layer] = [*fragments, *([env] if env else []), *([given] if given else [])]
    cfg = _merge(layers)
    cli_origins = apply_overrides(cfg, command_line.edits)
    if fragments:
        # Record what was actually read, in merge order, as NeMo Gym does.
        cfg[CONFIG_PATHS_KEY] = [fragment.name for fragment in fragments]
        origin = COMMAND_LINE if command_line.config_paths else (includes[0].origin or COMMAND_LINE)
        cli_origins.update({join_key(CONFIG_PATHS_KEY, i): origin for i in range(len(fragments))})
        cli_origins[CONFIG_PATHS_KEY] = origin
    sources = Sources.from_layers([*(layer.sources for layer in layers), cli_origins])
    free_keys = (
        frozenset(env.data if env else ())
        | _policy_values(given)
        | _interpolated_roots(OmegaConf.to_container(cfg, resolve=False))
    )
    cfg, sources = _with_directives(cfg, sources)
    tree = resolve_tree(cfg, sources, env_yaml=env_path)
    sources = sources.restricted_to(_dotted_keys(tree, ""))
    instances = find_instances(tree, sources)
    check_references(instances, sources)
    relays = find_environment_relays(tree, sources, instances)
    return ComposedConfig(tree=tree, instances=instances, sources=sources, free_keys=free_keys, relays=relays)


def compose_tree(config_paths: Sequence[str], values: Mapping[str, Any], *, cwd: Path) -> dict[str, Any]:
    """The resolved tree of config files with `values` merged on top, and no more: no env.yaml,
    command line or instance checks. NeMo Gym's offline parse (`GlobalConfigDictParser().parse`
    with an initial dict) is this: a server's verifier fixture loads its benchmark config to
    build a server without the rest of a stack (its placeholder policy model included)."""
    cwd = cwd.resolve()
    includes = parse_overrides([f"+{CONFIG_PATHS_KEY}=[{','.join(config_paths)}]"]).config_paths
    fragments = collect_fragments(includes, cwd=cwd) if config_paths else []
    merged = OmegaConf.merge(_merge(fragments), OmegaConf.create(dict(values)))
    assert isinstance(merged, DictConfig)
    sources = Sources.from_layers([fragment.sources for fragment in fragments])
    cfg, sources = _with_directives(merged, sources)
    return resolve_tree(cfg, sources, env_yaml=cwd / "env.yaml")


def _policy_values(given: _Values | None) -> frozenset[str]:
    return frozenset(key for key in given.data if key in POLICY_KEYS) if given else frozenset()


def _with_directives(cfg: DictConfig, sources: Sources) -> tuple[DictConfig, Sources]:
    """NeMo Gym's `_inherit_from` / `_copy` / `_delete_key`, applied before `${...}` is resolved."""
    container = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(container, dict)
    plain = {str(key): value for key, value in container.items()}
    applied, sources = apply_directives(plain, sources)
    if applied is plain:
        return cfg, sources
    return OmegaConf.create(applied), sources


def _env_yaml(dotenv_path: str | None, cwd: Path) -> Path:
    if dotenv_path is not None:
        return resolve_config_path(dotenv_path, cwd=cwd, listed_in=f"{COMMAND_LINE} {DOTENV_PATH_KEY}")
    path, is_explicit = env_yaml_path(cwd)
    if is_explicit and not path.is_file():
        raise ConfigError(
            f"env.yaml not found: NG_ENV_YAML points at {path}",
            hint="create the file or unset NG_ENV_YAML to use env.yaml in the current directory or the repo root",
        )
    return path


def _merge(layers: Sequence[_Layer]) -> DictConfig:
    merged: DictConfig | ListConfig = OmegaConf.create({})
    for layer in layers:
        try:
            merged = OmegaConf.merge(merged, OmegaConf.create(layer.data))
        except OmegaConfBaseException as exc:
            key = normalize_key(exc.full_key or "")
            where = layer.sources.get(key, layer.name)
            reason = (exc.msg or str(exc)).split("\n")[0]
            raise ConfigError(
                f"{where}  {key or '<root>'}: {reason}",
                hint="interpolations look like ${key} or ${oc.env:VAR}; escape a literal $ as \\${",
            ) from exc
    assert isinstance(merged, DictConfig)
    return merged


_INTERPOLATION_ROOT = re.compile(r"\$\{\s*([A-Za-z_][\w-]*)\s*(?=[.}\[])")
"""`${policy_api_key}`, `${a.b}` -> the top-level key read; resolvers (`${oc.env:X}`) do not match."""


def _interpolated_roots(node: Any) -> frozenset[str]:
    """Top-level keys that some `${...}` in the (unresolved) tree reads."""
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and "${" in item:
            found.update(_INTERPOLATION_ROOT.findall(item))
    return frozenset(found)


def _dotted_keys(node: Any, prefix: str) -> Iterator[str]:
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        dotted = join_key(prefix, key)
        yield dotted
        yield from _dotted_keys(child, dotted)
