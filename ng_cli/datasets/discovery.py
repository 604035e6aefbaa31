"""Where NeMo Gym's components are looked for, and what a config file says about itself.

NeMo Gym 0.7.0's `gym list` and `gym search` read files only (`nemo_gym/discovery.py`): never a
server, never an interpolation that needs a secret. The roots are `NEMO_GYM_EXTRA_ROOTS`
(`os.pathsep`-separated: NeMo Gym's `--search-dir` adds to it), then the working directory, then
the install root (this repo here, NeMo Gym's own root there), de-duplicated by resolved path; on a
name found under two roots, the earlier root's wins.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from ng_cli.config.paths import repo_root
from ng_cli.errors import ConfigError

__all__ = [
    "ASSETS",
    "EXTRA_ROOTS_ENV",
    "asset_config",
    "config_metadata",
    "fuzzy_matches",
    "read_yaml",
    "search_roots",
    "server_configs",
]

EXTRA_ROOTS_ENV = "NEMO_GYM_EXTRA_ROOTS"
SERVER_GROUPS = ("resources_servers", "responses_api_agents", "responses_api_models", "environment_servers")
"""The groups a server block sits under (NeMo Gym's `_SERVER_GROUP_KEYS`), in the order it scans them."""


def search_roots(cwd: Path | None = None) -> list[Path]:
    """`NEMO_GYM_EXTRA_ROOTS`, the working directory, this repo: the first wins on a name."""
    extra = [Path(entry) for entry in os.environ.get(EXTRA_ROOTS_ENV, "").split(os.pathsep) if entry]
    roots: list[Path] = []
    seen: set[Path] = set()
    for root in (*extra, cwd or Path.cwd(), repo_root()):
        resolved = root.resolve()
        if resolved not in seen:
            seen.add(resolved)
            roots.append(resolved)
    return roots


def read_yaml(path: Path) -> Any:
    """The file's YAML, or None when it cannot be read or parsed (listing never fails on one file)."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8", errors="ignore"))
    except (OSError, yaml.YAMLError):
        return None


def server_configs(tree: Any) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(group, implementation, block) of every server block of a config's top-level instances."""
    if not isinstance(tree, Mapping):
        return
    for instance in tree.values():
        if not isinstance(instance, Mapping):
            continue
        for group in SERVER_GROUPS:
            servers = instance.get(group)
            if not isinstance(servers, Mapping):
                continue
            for implementation, block in servers.items():
                if isinstance(block, Mapping):
                    yield group, str(implementation), block


def config_metadata(config: Path, roots: list[Path]) -> tuple[str | None, str | None]:
    """(domain, description): the first of each declared on a server block of the file, then of the
    files its `config_paths` include (in order, recursively), as NeMo Gym's `read_config_metadata`
    finds them in the file and then in the config it composes. Where an included file is missing,
    NeMo Gym's composing fails and only the file's own are kept: so here too."""
    domain, description = _first_metadata(read_yaml(config))
    if domain is not None and description is not None:
        return domain, description
    included = _included_trees(config, roots, seen={config.resolve()})
    if included is None:
        return domain, description
    for tree in included:
        found_domain, found_description = _first_metadata(tree)
        domain = domain if domain is not None else found_domain
        description = description if description is not None else found_description
    return domain, description


def _first_metadata(tree: Any) -> tuple[str | None, str | None]:
    domain: str | None = None
    description: str | None = None
    for _group, _implementation, block in server_configs(tree):
        if domain is None and block.get("domain"):
            domain = str(block["domain"])
        if description is None and block.get("description"):
            description = str(block["description"])
    return domain, description


def _included_trees(config: Path, roots: list[Path], seen: set[Path]) -> list[Any] | None:
    """The trees of the files `config` includes, depth first; None when one of them is missing."""
    tree = read_yaml(config)
    includes = tree.get("config_paths") if isinstance(tree, Mapping) else None
    trees: list[Any] = []
    for include in includes if isinstance(includes, list) else ():
        path = _under_roots(str(include), roots)
        if path is None:
            return None
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        trees.append(read_yaml(path))
        nested = _included_trees(path, roots, seen)
        if nested is None:
            return None
        trees.extend(nested)
    return trees


def _under_roots(relative: str, roots: list[Path]) -> Path | None:
    path = Path(relative)
    if path.is_absolute():
        return path if path.is_file() else None
    return next((root / path for root in roots if (root / path).is_file()), None)


def fuzzy_matches(query: str, *fields: str) -> bool:
    """NeMo Gym's `gym search` match: `query` is a substring of a field, or close (difflib, 0.70)
    to the field or one of its words (split on spaces, `_` and `-`); case ignored."""
    needle = query.lower()
    for field in fields:
        if not field:
            continue
        haystack = field.lower()
        if needle in haystack:
            return True
        words = haystack.replace("_", " ").replace("-", " ").split()
        if difflib.get_close_matches(needle, [haystack, *words], n=1, cutoff=0.70):
            return True
    return False


ASSETS = {
    "benchmark": ("benchmarks", "", "config"),
    "environment": ("environments", "", "config"),
    "resources-server": ("resources_servers", "configs", None),
    "model-type": ("responses_api_models", "configs", None),
    "agent-type": ("responses_api_agents", "configs", None),
}
"""NeMo Gym's `--<asset> NAME[/FLAVOR]` selectors -> (folder, configs sub-folder, default flavor)."""
_LISTINGS = {
    "benchmark": "benchmarks",
    "environment": "environments",
    "resources-server": "resources-servers",
    "model-type": "models",
    "agent-type": "agents",
}


def asset_config(asset: str, value: str, roots: list[Path]) -> Path:
    """The config `gym ... --<asset> <value>` loads (NeMo Gym's `_asset_config_path`):
    `<folder>/<name>/[configs/]<flavor>.yaml` under the first root that has it (the flavor defaults
    to `config` for benchmarks and environments, else to the name), or for a benchmark or an
    environment `<name>/<sub>`, that folder's `config.yaml`: `--benchmark aime24`,
    `--benchmark livecodebench/v5_2408_2502/config`, `--model-type vllm_model`."""
    folder, sub, default_flavor = ASSETS[asset]
    name, _, flavor = value.partition("/")
    path = f"{folder}/{name}/{sub}".rstrip("/") + f"/{flavor or default_flavor or name}.yaml"
    nested = [root / folder / value / "config.yaml" for root in roots] if "/" in value and not sub else []
    for candidate in [*nested, *(root / path for root in roots)]:
        if candidate.is_file():
            return candidate.resolve()
    configs = [
        config.relative_to(root).as_posix()
        for root in roots
        for config in sorted((root / folder).glob("**/*.yaml"))
    ]
    near = difflib.get_close_matches(path, configs, n=1)
    raise ConfigError(
        f"`--{asset} {value}` was specified which implies config `{path}`, which does not exist."
        + (f" Did you mean `{near[0]}`?" if near else ""),
        hint=f"`gym list {_LISTINGS[asset]}` lists them (looked under {', '.join(map(str, roots))})",
    )
