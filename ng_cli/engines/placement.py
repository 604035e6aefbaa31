"""`plan_placement()`: the engine plan -> Ray placement groups, and whether a cluster can hold them (pure).

The engine plan (`engines.plan`) says what each vLLM process needs; on Ray those needs become
placement groups, so a group's devices are reserved together before any engine starts:

    one bundle per GPU ({"GPU": 1, "CPU": c}), or per TP*PP rank slot on CPU ({"CPU": c})
    replicas                 one group per engine (per shared device set with replicas_per_device),
                             STRICT_PACK: an engine's TP*PP bundles on one node
    internal_lb (EP)         one group per expert group (one vLLM process), STRICT_PACK always
    external_lb (EP)         one group per expert group, STRICT_PACK: its data-parallel ranks share
                             one node; with `expert_groups_may_span` one STRICT_PACK group per rank,
                             so ranks may land on different nodes (rank 0's node is the coordinator)

Names carry a per-run id (`ng-<run>-<instance>-g<k>`): NeMo Gym users hit name collisions and
races when several instances start on one cluster. `check_fit` simulates Ray's packing on the
cluster's free resources so an impossible layout is a `PlacementError` naming the group, what it
needs and what the nodes have, instead of a placement group pending forever.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ng_cli.engines.plan import EngineSpec, InstanceEngines
from ng_cli.errors import PlacementError

__all__ = [
    "STRATEGY",
    "Bundle",
    "EnginePlacement",
    "GroupPlacement",
    "NodeCapacity",
    "PlacementPlan",
    "check_fit",
    "cpus_text",
    "plan_placement",
    "ray_name",
]

STRATEGY = "STRICT_PACK"
"""Every group's bundles on one node: an engine's TP*PP devices (and an expert group's ranks) share
NVLink and never straddle nodes; spanning is done with one group per rank instead."""


def ray_name(run_id: str, *parts: str) -> str:
    """`ng-<run>-<parts>`: unique per run, and only characters every Ray API accepts."""
    return "-".join(["ng", run_id, *(re.sub(r"[^A-Za-z0-9_.-]+", "_", part) for part in parts)])


@dataclass(frozen=True)
class Bundle:
    """One slot of a placement group: one GPU (and its CPUs), or CPUs only."""

    gpus: int
    cpus: float

    def resources(self) -> dict[str, float]:
        """Ray's bundle mapping (zero amounts left out: Ray refuses them)."""
        return {name: float(amount) for name, amount in (("GPU", self.gpus), ("CPU", self.cpus)) if amount}


@dataclass(frozen=True)
class EnginePlacement:
    """Where one engine's actor goes: its group, its bundles, its name on the cluster."""

    engine: str
    """The `EngineSpec.name`."""
    group: str
    """The placement group's name."""
    bundles: tuple[int, ...]
    """Bundle indices of the group it uses; its actor sits on the first."""
    actor: str
    gpu_share: float
    """The fraction of each bundle's GPU it takes (1 / replicas sharing the device set)."""


@dataclass(frozen=True)
class GroupPlacement:
    """One placement group: reserved whole, before its engines start."""

    name: str
    instance: str
    bundles: tuple[Bundle, ...]
    engines: tuple[str, ...]

    @property
    def gpus(self) -> int:
        return sum(bundle.gpus for bundle in self.bundles)

    @property
    def cpus(self) -> float:
        return sum(bundle.cpus for bundle in self.bundles)

    def needs(self) -> str:
        """`4 GPUs and 4 CPUs on one node`, in words for errors and tables."""
        parts = [f"{self.gpus} GPU{'s' * (self.gpus != 1)}"] if self.gpus else []
        parts.append(f"{_num(self.cpus)} CPU{'s' * (self.cpus != 1)}")
        return f"{' and '.join(parts)} on one node"


@dataclass(frozen=True)
class PlacementPlan:
    """Every placement group and engine actor of one run."""

    run_id: str
    groups: tuple[GroupPlacement, ...]
    engines: tuple[EnginePlacement, ...]
    server_cpus: dict[str, float] = field(default_factory=dict)
    """Server instances that run as actors, and the CPUs each asks for."""

    def of(self, engine: str) -> EnginePlacement:
        for placement in self.engines:
            if placement.engine == engine:
                return placement
        raise KeyError(engine)

    def group(self, name: str) -> GroupPlacement:
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(name)

    def cpus_needed(self) -> float:
        """Every group's CPUs plus every server actor's."""
        return sum(group.cpus for group in self.groups) + sum(self.server_cpus.values())

    def server_actor(self, server: str) -> str:
        return ray_name(self.run_id, "server", server)

    def describe(self) -> list[dict[str, Any]]:
        """One printable row per placement group."""
        return [
            {
                "group": group.name,
                "strategy": STRATEGY,
                "bundles": " ".join(str(bundle.resources()) for bundle in group.bundles),
                "needs": group.needs(),
                "engines": ", ".join(group.engines),
            }
            for group in self.groups
        ]


@dataclass(frozen=True)
class NodeCapacity:
    """What one node has free for us: Ray's `available_resources` per node.

    Nodes are told apart by `node_id`: several raylets may share one address (two nodes on one
    host, a test cluster), and keying by address merged them into one (a fitting stack was refused)."""

    name: str
    """How messages show it: `<node id> (<address>)`."""
    gpus: float
    cpus: float
    node_id: str = ""
    """Ray's node id (default: the name)."""

    @property
    def key(self) -> str:
        return self.node_id or self.name


def plan_placement(
    plans: Sequence[InstanceEngines],
    *,
    run_id: str,
    cpus_per_bundle: float = 1.0,
    expert_groups_may_span: bool = False,
    server_cpus: dict[str, float] | None = None,
) -> PlacementPlan:
    """Placement groups for every engine of `plans` (GPU engines: one bundle per device)."""
    groups: list[GroupPlacement] = []
    placements: list[EnginePlacement] = []
    for plan in plans:
        for members in _units(plan, expert_groups_may_span=expert_groups_may_span):
            name = ray_name(run_id, plan.instance, f"g{len(groups)}")
            group, engine_placements = _group(
                name, plan, members, run_id=run_id, cpus_per_bundle=cpus_per_bundle
            )
            groups.append(group)
            placements.extend(engine_placements)
    return PlacementPlan(
        run_id=run_id, groups=tuple(groups), engines=tuple(placements), server_cpus=dict(server_cpus or {})
    )


def check_fit(plan: PlacementPlan, nodes: Sequence[NodeCapacity]) -> dict[str, str]:
    """Which node each group would take (largest first, first fit), or PlacementError naming the
    first group that does not fit, what it needs and what is free (Ray would leave it pending)."""
    free = {node.key: [node.gpus, node.cpus] for node in nodes}
    names = {node.key: node.name for node in nodes}
    taken: dict[str, str] = {}
    for group in sorted(plan.groups, key=lambda group: (-group.gpus, -group.cpus, group.name)):
        placed = _place(group, free)
        if placed is None:
            raise PlacementError(
                f"placement group {group.name} (engines {', '.join(group.engines)}) needs {group.needs()}, "
                f"and the cluster cannot hold it: {_shortfall(group, free, names)}",
                group=group.name,
                missing=_missing(group, free),
                hint=_fit_hint(group),
            )
        taken[group.name] = names[placed]
    for server, cpus in sorted(plan.server_cpus.items(), key=lambda item: -item[1]):
        node = next((name for name, (_, c) in free.items() if c + 1e-9 >= cpus), None)
        if node is None:
            most = max((c for _, c in free.values()), default=0.0)
            raise PlacementError(
                f"server actor '{server}' needs {cpus_text(cpus)} on one node besides the engines' "
                f"placement groups; the most any node has left is {_num(most)} "
                f"(free now: {_free_text(free, names)})",
                group=plan.server_actor(server),
                missing=f"{cpus_text(cpus - most)} on one node",
                hint="lower ray.server_num_cpus, run fewer servers as actors (ray.servers), or add nodes",
            )
        free[node][1] -= cpus
        taken[plan.server_actor(server)] = names[node]
    return taken


def _units(plan: InstanceEngines, *, expert_groups_may_span: bool) -> Iterable[tuple[EngineSpec, ...]]:
    """The engines that must share one placement group."""
    if plan.mode == "replicas":  # engines on the same device set share it (replicas_per_device)
        by_devices: dict[tuple[str, ...], list[EngineSpec]] = {}
        for engine in plan.engines:
            key = engine.devices or (f"cpu-{engine.index}",)
            by_devices.setdefault(key, []).append(engine)
        yield from (tuple(members) for members in by_devices.values())
    elif plan.mode == "external_lb" and expert_groups_may_span:
        yield from ((engine,) for engine in plan.engines)
    else:
        by_group: dict[int, list[EngineSpec]] = {}
        for engine in plan.engines:
            by_group.setdefault(engine.group, []).append(engine)
        yield from (tuple(members) for members in by_group.values())


def _slots(engine: EngineSpec) -> int:
    """Bundles one engine process needs: TP*PP per data-parallel rank it runs."""
    ranks = engine.data_parallel_size if engine.data_parallel_rank is None else 1
    return ranks * engine.tensor_parallel_size * engine.pipeline_parallel_size


def _group(
    name: str, plan: InstanceEngines, members: tuple[EngineSpec, ...], *, run_id: str, cpus_per_bundle: float
) -> tuple[GroupPlacement, list[EnginePlacement]]:
    on_gpu = bool(members[0].devices)
    shared = plan.mode == "replicas" and len(members) > 1  # replicas_per_device: same bundles
    slots = _slots(members[0]) if shared else sum(_slots(engine) for engine in members)
    group = GroupPlacement(
        name=name,
        instance=plan.instance,
        bundles=tuple(Bundle(gpus=1 if on_gpu else 0, cpus=cpus_per_bundle) for _ in range(slots)),
        engines=tuple(engine.name for engine in members),
    )
    placements = []
    first = 0
    for engine in members:
        count = _slots(engine)
        placements.append(
            EnginePlacement(
                engine=engine.name,
                group=name,
                bundles=tuple(range(first, first + count)),
                actor=ray_name(run_id, plan.instance, f"engine-{engine.index}"),
                gpu_share=(1.0 / len(members)) if shared else 1.0,
            )
        )
        if not shared:
            first += count
    return group, placements


def _place(group: GroupPlacement, free: dict[str, list[float]]) -> str | None:
    """Take the group's resources from the first node of `free` that holds all of it (STRICT_PACK)."""
    for name, (gpus, cpus) in free.items():
        if gpus + 1e-9 >= group.gpus and cpus + 1e-9 >= group.cpus:
            free[name][0] -= group.gpus
            free[name][1] -= group.cpus
            return name
    return None


def _missing(group: GroupPlacement, free: dict[str, list[float]]) -> str:
    """The smallest shortfall on any one node, in words: `2 GPUs on one node`."""
    best = min(
        free.values(),
        key=lambda amounts: (max(0.0, group.gpus - amounts[0]), max(0.0, group.cpus - amounts[1])),
        default=[0.0, 0.0],
    )
    gaps = [(group.gpus - best[0], "GPU"), (group.cpus - best[1], "CPU")]
    words = [f"{_num(gap)} {kind}{'s' * (gap != 1)}" for gap, kind in gaps if gap > 1e-9]
    return (" and ".join(words) or "resources") + " on one node"


def _shortfall(group: GroupPlacement, free: dict[str, list[float]], names: dict[str, str]) -> str:
    if not free:
        return "the cluster has no nodes"
    return f"missing {_missing(group, free)} (free now: {_free_text(free, names)})"


def _free_text(free: dict[str, list[float]], names: dict[str, str]) -> str:
    """`<node id> (<address>): 0 GPU 2 CPU, ...`: each node by its id, so two on one address stay two."""
    return ", ".join(f"{names[key]}: {_num(g)} GPU {_num(c)} CPU" for key, (g, c) in free.items())


def _fit_hint(group: GroupPlacement) -> str:
    if group.gpus:
        return (
            "lower tensor/pipeline/data-parallel sizes, add GPU nodes, or (external_lb) set "
            "ray.expert_groups_may_span: true to let data-parallel ranks use several nodes"
        )
    return "lower ray.engine_num_cpus, give the local cluster more CPUs (ray.num_cpus), or add nodes"


def cpus_text(value: float) -> str:
    """`1 CPU`, `2.5 CPUs`."""
    return f"{_num(value)} CPU{'s' * (value != 1)}"


def _num(value: float) -> str:
    return f"{value:g}"
