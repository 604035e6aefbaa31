"""The datasets the config's agents declare, each with what its rows are checked against.

An agent's `datasets:` entries are validated as `DatasetConfig` (errors name the instance, key
and file:line). A row of an agent's dataset must be a run request for that agent; when the
agent's resources server declares a `row_model`, the row must also satisfy it. Finding that
model means importing the environment's `app.py`, which only this data tooling does in the
parent process (the launcher never does).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.instances import ServerInstance
from ng_cli.config.paths import implementation_dir, repo_root
from ng_cli.config.schema import DatasetConfig, validate_block
from ng_cli.errors import ConfigError
from ng_cli.outputs import Input

__all__ = ["AGENTS", "SPLITS", "AgentDataset", "dataset_inputs", "datasets_for", "resolve_data_path"]

AGENTS = "responses_api_agents"
SPLITS = ("train", "validation", "example")


class _Datasets(BaseModel):
    """Only the `datasets` key of an agent block (the rest is the agent's own config)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    datasets: list[DatasetConfig] = Field(default_factory=list)


@dataclass(frozen=True)
class AgentDataset:
    """One `datasets:` entry of one agent, resolved."""

    agent: str
    dataset: DatasetConfig
    path: Path
    """The JSONL file (may not exist: that is reported as a problem of the dataset)."""
    row_model: type[BaseModel] | None
    """The environment's model of a row's verifier inputs, when it declares one."""

    @property
    def label(self) -> str:
        return f"{self.agent}/{self.dataset.name}"


def datasets_for(config: ComposedConfig, splits: tuple[str, ...]) -> list[AgentDataset]:
    """Every agent's datasets whose type is in `splits`, in config order."""
    found: list[AgentDataset] = []
    row_models: dict[str, type[BaseModel] | None] = {}
    for instance, dataset in _declared(config):
        if dataset.type not in splits:
            continue
        resources = _resources_instance(config, instance)
        if resources is not None and resources.name not in row_models:
            row_models[resources.name] = _row_model(resources)
        found.append(
            AgentDataset(
                agent=instance.name,
                dataset=dataset,
                path=resolve_data_path(dataset.jsonl_fpath),
                row_model=row_models.get(resources.name) if resources is not None else None,
            )
        )
    return found


def dataset_inputs(config: ComposedConfig) -> list[Input]:
    """Every dataset file the config declares, of any split: what no output may overwrite."""
    return [
        Input(
            resolve_data_path(dataset.jsonl_fpath),
            f"the dataset {instance.name}/{dataset.name} (jsonl_fpath: {dataset.jsonl_fpath})",
        )
        for instance, dataset in _declared(config)
    ]


def _declared(config: ComposedConfig) -> Iterator[tuple[ServerInstance, DatasetConfig]]:
    """(agent, dataset) for every `datasets:` entry of every agent, validated, in config order."""
    for instance in config.instances.values():
        if instance.server_type != AGENTS:
            continue
        declared = validate_block(
            _Datasets, instance, {"datasets": instance.block.get("datasets") or []}, sources=config.sources
        )
        for dataset in declared.datasets:
            yield instance, dataset


def resolve_data_path(raw: str) -> Path:
    """A dataset path: absolute as given, else relative to the cwd if it exists there, else the repo root."""
    path = Path(raw).expanduser()
    if path.is_absolute():
        return path
    here = Path.cwd() / path
    return here if here.exists() else repo_root() / path


def _resources_instance(config: ComposedConfig, agent: ServerInstance) -> ServerInstance | None:
    ref = agent.block.get("resources_server")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return config.instances.get(name) if isinstance(name, str) else None


def _row_model(resources: ServerInstance) -> type[BaseModel] | None:
    from ng_cli.servers.loading import load_server_class  # imports the environment: only when needed

    entrypoint = str(resources.block.get("entrypoint") or "app.py")
    app_path = implementation_dir(resources.server_type, resources.implementation) / entrypoint
    try:
        server_class = load_server_class(app_path)
    except ConfigError:
        raise
    except Exception as exc:  # the environment's own import failed: say which, keep the cause
        raise ConfigError(
            f"{resources.source or resources.name}: cannot import {app_path} to read its row model: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    model: Any = getattr(server_class, "row_model", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None
