"""NeMo Gym's components by name: its agents, model servers and resources servers, as `gym list`
finds them (`nemo_gym/agent_registry.py`, `model_registry.py`, `resources_server_registry.py`).

Under each root of `discovery.search_roots` (the earlier root wins on a name; within a root,
folders and config files in sorted order):

* agents: each `responses_api_agents/<name>/` with an `app.py` or a `configs/*.yaml` holding a
  `responses_api_agents` block; composable (pattern A) when a variant names a `resources_server`
  and none declares an `agent_framework` or an `anthropic_api_key`, else self-contained (B);
* models: each `responses_api_models/<name>/configs/<flavor>.yaml`, named `<name>` for the flavor
  of that name and `<name>/<flavor>` for the others (the `--model-type` value);
* resources servers: each `resources_servers/<name>/configs/<flavor>.yaml` holding a
  `resources_servers` block, named the same way, with its domain and description.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ng_cli.datasets.discovery import config_metadata, read_yaml, server_configs

__all__ = [
    "Agent",
    "Model",
    "ResourcesServer",
    "discover_agents",
    "discover_models",
    "discover_resources_servers",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Agent:
    name: str
    path: Path
    configs: tuple[Path, ...]
    self_contained: bool
    description: str | None

    @property
    def variants(self) -> list[str]:
        return sorted(config.stem for config in self.configs)

    def payload(self) -> dict[str, Any]:
        """`gym list agents --json`'s object."""
        return {
            "name": self.name,
            "pattern": "B (self-contained)" if self.self_contained else "A (composable)",
            "self_contained": self.self_contained,
            "variants": self.variants,
            "description": self.description,
        }


@dataclass(frozen=True)
class Model:
    name: str
    group: str
    config: Path

    def payload(self) -> dict[str, Any]:
        """`gym list models --json`'s object."""
        return {"name": self.name, "model": self.name, "model_group": self.group}


@dataclass(frozen=True)
class ResourcesServer:
    name: str
    config: Path
    path: Path
    domain: str | None
    description: str | None

    def payload(self) -> dict[str, Any]:
        """`gym list resources-servers --json`'s object."""
        return {"name": self.name, "domain": self.domain, "description": self.description}


def discover_agents(roots: list[Path]) -> dict[str, Agent]:
    return _merged(roots, "responses_api_agents", _agents)


def discover_models(roots: list[Path]) -> dict[str, Model]:
    return _merged(roots, "responses_api_models", lambda folder: _models(folder))


def discover_resources_servers(roots: list[Path]) -> dict[str, ResourcesServer]:
    return _merged(roots, "resources_servers", lambda folder: _resources_servers(folder, roots))


def _merged(roots: list[Path], folder: str, scan: Callable[[Path], dict[str, T]]) -> dict[str, T]:
    merged: dict[str, T] = {}
    for root in roots:
        for name, entry in scan(root / folder).items():
            merged.setdefault(name, entry)
    return merged


def _children(folder: Path) -> Iterator[tuple[Path, list[Path]]]:
    """Each sub-folder and its `configs/*.yaml`, sorted."""
    if not folder.is_dir():
        return
    for child in sorted(folder.iterdir()):
        if child.is_dir():
            configs = child / "configs"
            yield child, sorted(configs.glob("*.yaml")) if configs.is_dir() else []


def _flavor_name(child: Path, config: Path) -> str:
    return child.name if config.stem == child.name else f"{child.name}/{config.stem}"


def _agent_blocks(config: Path) -> list[Mapping[str, Any]]:
    tree = read_yaml(config)
    return [block for group, _name, block in server_configs(tree) if group == "responses_api_agents"]


def _agents(folder: Path) -> dict[str, Agent]:
    agents: dict[str, Agent] = {}
    for child, configs in _children(folder):
        blocks = {config: _agent_blocks(config) for config in configs}
        agent_configs = tuple(config for config in configs if blocks[config])
        if not (child / "app.py").is_file() and not agent_configs:
            continue
        every = [block for config in agent_configs for block in blocks[config]]
        composable = (
            any("resources_server" in block for block in every)
            and not any("agent_framework" in block for block in every)
            and not any("anthropic_api_key" in block for block in every)
        )
        description = next((b["description"] for b in every if isinstance(b.get("description"), str)), None)
        agents[child.name] = Agent(
            child.name, child, agent_configs, bool(every) and not composable, description
        )
    return agents


def _models(folder: Path) -> dict[str, Model]:
    return {
        _flavor_name(child, config): Model(_flavor_name(child, config), child.name, config)
        for child, configs in _children(folder)
        for config in configs
    }


def _resources_servers(folder: Path, roots: list[Path]) -> dict[str, ResourcesServer]:
    servers: dict[str, ResourcesServer] = {}
    for child, configs in _children(folder):
        for config in configs:
            tree = read_yaml(config)
            if not isinstance(tree, Mapping) or not any(
                isinstance(instance, Mapping) and isinstance(instance.get("resources_servers"), Mapping)
                for instance in tree.values()
            ):
                continue
            domain, description = config_metadata(config, roots)
            name = _flavor_name(child, config)
            servers[name] = ResourcesServer(name, config, child, domain, description)
    return servers
