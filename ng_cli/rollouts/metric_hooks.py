"""Each environment's own metric hooks, found from the config, run where the metrics are written.

NeMo Gym 0.7.0 computes `_aggregate_metrics.json` by POSTing every agent's rollouts to the
`/aggregate_metrics` of the environment behind it, where the server's `compute_metrics`,
`compute_repeat_metrics` and `get_key_metrics` shape the numbers (math_with_judge: pass@k,
majority@k, its key metrics). Here the collector and `ng_aggregate_rollouts` run the same hooks
in-process, so no stack has to be up to aggregate shards:

    agent instance --resources_server--> environment instance --entrypoint--> server class
        native (ng_cli.servers.ResourcesServer)   its `metric_hooks` (a MetricHooks), else the defaults
        NeMo Gym's (SimpleResourcesServer)        its own three methods, on an instance without config

An agent the tree does not describe gets NeMo Gym's defaults (`MetricHooks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ng_cli.config.instances import find_instances
from ng_cli.config.paths import implementation_dir
from ng_cli.config.sources import Sources
from ng_cli.errors import ConfigError

__all__ = ["MetricHooks", "Tasks", "hooks_by_agent", "hooks_of"]

Tasks = list[list[dict[str, Any]]]
"""Rollouts grouped by task (tasks[i]: task i's rollouts, in rollout order), as NeMo Gym passes them."""


class MetricHooks:
    """NeMo Gym's `AggregateMetricsMixin` defaults; an environment overrides what it needs."""

    def compute_metrics(self, tasks: Tasks) -> dict[str, Any]:  # noqa: ARG002 (an overridable hook)
        """Metrics of the whole run, merged into `agent_metrics` (`per_task_metrics` go per task)."""
        return {}

    def compute_repeat_metrics(self, tasks: Tasks) -> dict[str, Any]:  # noqa: ARG002 (an overridable hook)
        """Metrics of one repeat, replacing the generic ones of the same name per repeat."""
        return {}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """The headline numbers: by default every `mean/*` one."""
        return {k: v for k, v in agent_metrics.items() if k.startswith("mean/")}

    @property
    def has_repeat_metrics(self) -> bool:
        """Whether `compute_repeat_metrics` is overridden (NeMo Gym skips the default one)."""
        return type(self).compute_repeat_metrics is not MetricHooks.compute_repeat_metrics


class _NemoGymHooks(MetricHooks):
    """A NeMo Gym server's hooks, called on an instance of its class built without config."""

    def __init__(self, server: Any) -> None:
        self._server = server

    def compute_metrics(self, tasks: Tasks) -> dict[str, Any]:
        return dict(self._server.compute_metrics(tasks))

    def compute_repeat_metrics(self, tasks: Tasks) -> dict[str, Any]:
        return dict(self._server.compute_repeat_metrics(tasks))

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return dict(self._server.get_key_metrics(agent_metrics))

    @property
    def has_repeat_metrics(self) -> bool:
        from ng_cli.nemo_gym_compat.api.reward_profile import AggregateMetricsMixin

        own = type(self._server).compute_repeat_metrics
        return own is not AggregateMetricsMixin.compute_repeat_metrics


def hooks_of(server_class: type) -> MetricHooks:
    """The metric hooks of a loaded server class (module docstring)."""
    nemo_gym_class = getattr(server_class, "nemo_gym_class", None)
    if nemo_gym_class is not None:
        return _NemoGymHooks(nemo_gym_class.__new__(nemo_gym_class))  # no config: the hooks read none
    hooks = getattr(server_class, "metric_hooks", None)
    return hooks if isinstance(hooks, MetricHooks) else MetricHooks()


def hooks_by_agent(tree: Mapping[str, Any]) -> dict[str, MetricHooks]:
    """Agent instance name -> the hooks of the environment it names, for every agent in `tree`."""
    from ng_cli.servers.loading import load_server_class

    instances = find_instances(tree, Sources())
    loaded: dict[str, MetricHooks] = {}
    found: dict[str, MetricHooks] = {}
    for agent in instances.values():
        if agent.server_type != "responses_api_agents":
            continue
        ref = agent.block.get("resources_server")
        environment = instances.get(str(ref.get("name"))) if isinstance(ref, Mapping) else None
        if environment is None or environment.server_type != "resources_servers":
            continue
        if environment.name not in loaded:
            entrypoint = environment.block.get("entrypoint")
            if not isinstance(entrypoint, str) or not entrypoint:
                raise ConfigError(f"{environment.key}.entrypoint: expected a file name such as app.py")
            app_path = implementation_dir(environment.server_type, environment.implementation) / entrypoint
            loaded[environment.name] = hooks_of(load_server_class(app_path))
        found[agent.name] = loaded[environment.name]
    return found
