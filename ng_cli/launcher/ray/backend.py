"""The Ray placement backend: the launcher's engines and servers as actors on a Ray cluster.

    RayBackend.connect(config)      ray.init: `local` starts a private cluster, else joins one
    place(placement)                 the placement plan checked against the nodes' free resources
                                     (PlacementError naming what is missing), then its groups made
    listen(server) / start_server    a server actor binds on its node, later starts the child there
    start_engine(spec, plan, sink)   an engine actor on its bundle starts vLLM and reports its URL
    stop()                           ends our processes, kills our actors, removes our placement
                                     groups (nothing else on the cluster), disconnects

Handles (`RayChild`) look like local children to `Stack` and `EngineFleet`: a pid, an exit code,
the last lines, `kill()`; a relay thread polls the actor for output and for the process's end,
and an actor that dies reads as an exit once Ray has said why (`verdict`), reported with its name
and node. A restart goes only to a node Ray lists alive and that `NodeWatch` does not bar: never
a lost node, nor one whose verdict is pending, until Ray has run work there again.

Everything here imports Ray lazily: only a config with `ray.address` reaches this module.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ng_cli.engines.placement import NodeCapacity, PlacementPlan, check_fit
from ng_cli.engines.plan import ENGINE_MAIN, EngineSpec, InstanceEngines
from ng_cli.errors import LaunchError, PlacementError
from ng_cli.launcher.engines import NotPlacedYet
from ng_cli.launcher.process import LineSink
from ng_cli.launcher.ray.child import RayChild, import_ray, node_text
from ng_cli.launcher.ray.config import RayConfig
from ng_cli.launcher.ray.verdict import NodeWatch, is_node_alive

__all__ = ["RayBackend", "RayChild"]

_CALL_TIMEOUT_S = 30.0
_REACH_TIMEOUT_S = 3.0
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_ANY = ("0.0.0.0", "::", "")
_SAY_EVERY_S = 10.0
"""While waiting for room after a lost node, a line this often."""
_REVIVE_S = 10.0
"""A group Ray has not re-placed (RESCHEDULING) this long after a lost node is replaced by a new one."""


class RayBackend:
    """Our actors and placement groups on one cluster, and the connection to it."""

    def __init__(self, config: RayConfig, ray: Any) -> None:
        self.config = config
        self.ray = ray
        self.placement: PlacementPlan | None = None
        self.groups: dict[str, Any] = {}
        self.actors: list[Any] = []
        """Every actor we created (engine, lease, server): stop() kills exactly these."""
        self.children: list[RayChild] = []
        self._restarts: dict[str, int] = {}
        self._group_ports: dict[tuple[str, int], tuple[str, int]] = {}
        self._servers: dict[str, tuple[Any, str, dict[str, Any]]] = {}
        self._actor_names: list[str] = []
        self._stopped = False
        self._group_names: dict[str, str] = {}
        """Planned group name -> the name of the Ray group that now holds it (a new one after a loss)."""
        self._planned: dict[str, EngineSpec] = {}
        """Each engine's spec as planned (ports unpicked): a re-placed engine picks ports on its new node."""
        self._engine_nodes: dict[str, str] = {}
        self._waiting: dict[str, tuple[float, float]] = {}
        """What waits for room after a lost node -> (since, when we last said so)."""
        self.say: Callable[[str], None] = lambda _line: None
        """ng_run's own lines (the stack sets it): waiting for capacity, re-placed groups."""
        self.watch = NodeWatch()
        """Nodes no restart may go to: lost, or an actor there awaits Ray's verdict (or got none)."""

    @classmethod
    def connect(cls, config: RayConfig, *, cpus_needed: float = 0.0) -> RayBackend:
        """Join the cluster at `ray.address`, or start a private one (`local`, with at least
        `cpus_needed` logical CPUs unless `ray.num_cpus` says otherwise); LaunchError if unreachable."""
        ray = import_ray()
        options: dict[str, Any] = {
            "namespace": config.namespace,
            "log_to_driver": False,  # output reaches us through the actors' poll, prefixed per process
            "runtime_env": config.runtime_env,
        }
        if config.is_local:
            options |= {
                # Logical CPUs are scheduling tokens: on a small machine the stack's actors still fit.
                "num_cpus": config.num_cpus or max(os.cpu_count() or 1, math.ceil(cpus_needed)),
                "num_gpus": config.num_gpus,
                "object_store_memory": config.object_store_memory_mb * 2**20,
                "include_dashboard": False,
            }
        else:
            _check_reachable(config.address)  # Ray itself retries a wrong address for minutes
            options["address"] = config.address
        try:
            ray.init(**options)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise LaunchError(
                f"ray.address {config.address}: cannot connect to a Ray cluster: {error}",
                hint="`ray status` on a node of the cluster shows its address; `local` starts a private one",
            ) from None
        return cls(config, ray)

    def total_gpus(self) -> int:
        return int(self.ray.cluster_resources().get("GPU", 0))

    def free_capacity(self) -> list[NodeCapacity]:
        """Free resources per alive node."""
        # Ray's only per-node view without the dashboard (ray[default]) is this developer API.
        per_node = self.ray._private.state.available_resources_per_node()
        alive = {node["NodeID"]: node for node in self.ray.nodes() if node.get("Alive")}
        return [
            NodeCapacity(
                name=node_text({"node_id": node_id, "ip": alive[node_id].get("NodeManagerAddress")}),
                gpus=float(resources.get("GPU", 0)),
                cpus=float(resources.get("CPU", 0)),
                node_id=node_id,
            )
            for node_id, resources in per_node.items()
            if node_id in alive
        ]

    def place(self, placement: PlacementPlan) -> None:
        """Check the plan against the free resources, then reserve every group; PlacementError if not."""
        from ray.util.placement_group import placement_group

        self.placement = placement
        check_fit(placement, self.free_capacity())
        for group in placement.groups:
            self.groups[group.name] = placement_group(
                [bundle.resources() for bundle in group.bundles], strategy="STRICT_PACK", name=group.name
            )
            self._group_names[group.name] = group.name
        deadline = time.monotonic() + self.config.placement_timeout_s
        for name, group in self.groups.items():
            try:
                self.ray.get(group.ready(), timeout=max(0.1, deadline - time.monotonic()))
            except self.ray.exceptions.GetTimeoutError:
                raise PlacementError(
                    f"placement group {name} ({placement.group(name).needs()}) is still pending after "
                    f"{self.config.placement_timeout_s:.0f} s (ray.placement_timeout_s): the cluster's "
                    "free resources changed, or nodes are still joining",
                    group=name,
                    missing=placement.group(name).needs(),
                    hint="`ray status` shows the pending demand; free the resources or add nodes",
                ) from None

    # -- engines ---------------------------------------------------------------------------------

    def start_engine(
        self, spec: EngineSpec, plan: InstanceEngines, sink: LineSink
    ) -> tuple[RayChild, EngineSpec]:
        """An actor on the engine's bundle starts vLLM; the spec it runs (node address, ports) comes back."""
        assert self.placement is not None
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from ng_cli.launcher.ray.actors import ENGINE_MAIN_TOKEN, GpuLease, ProcessHost

        placement = self.placement.of(spec.name)
        self._planned.setdefault(spec.name, spec)
        if spec.name in self._engine_nodes:  # a restart: its group may have lost its node
            self._ensure_group(placement.group)
        group = self.groups[placement.group]
        on_gpu = bool(spec.devices)
        attempt = self._restarts.get(spec.name, 0)
        self._restarts[spec.name] = attempt + 1
        suffix = f"-r{attempt}" if attempt else ""

        def on_bundle(index: int) -> Any:
            return PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index)

        cpus = self.config.engine_num_cpus * placement.gpu_share
        actor = ProcessHost.options(
            name=placement.actor + suffix,
            num_cpus=cpus,
            num_gpus=placement.gpu_share if on_gpu else 0,
            scheduling_strategy=on_bundle(placement.bundles[0]),
        ).remote(spec.name)
        self.actors.append(actor)
        self._actor_names.append(placement.actor + suffix)
        leases: list[Any] = []
        try:
            node = self._call(
                actor.node.remote(), spec.name, "start its actor", self.config.placement_timeout_s
            )
            if spec.name in self._engine_nodes and node["node_id"] in self.watch.barred():
                raise _Barred(spec.name)  # the group moved onto a barred node meanwhile: not there
            gpu_ids: list[str] = []
            if on_gpu:
                gpu_ids = self._call(actor.gpu_ids.remote(), spec.name, "read its GPU ids")
                for index in placement.bundles[1:]:  # one lease per other bundle: its GPU id
                    lease = GpuLease.options(
                        name=f"{placement.actor}{suffix}-gpu{index}",
                        num_cpus=0,
                        num_gpus=placement.gpu_share,
                        scheduling_strategy=on_bundle(index),
                    ).remote()
                    self.actors.append(lease)
                    leases.append(lease)
                    self._actor_names.append(f"{placement.actor}{suffix}-gpu{index}")
                    gpu_ids += self._call(  # its first call: the lease actor starts first
                        lease.gpu_ids.remote(),
                        spec.name,
                        f"lease the GPU of bundle {index}",
                        self.config.placement_timeout_s,
                    )
            moved = self._engine_nodes.get(spec.name, node["node_id"]) != node["node_id"]
            if moved:  # re-placed after a lost node: ports free on the new node, a new URL
                self.say(f"{spec.name} re-placed on {node_text(node)}")
                spec = self._planned[spec.name]
                if spec.data_parallel_rank in (None, 0):
                    self._group_ports.pop((spec.instance, spec.group), None)
            self._engine_nodes[spec.name] = node["node_id"]
            spec = self._address(spec, actor, node)
            env = plan.env_of(spec, {})
            # Ray's 1-thread default would throttle CPU vLLM.
            unset = ["OMP_NUM_THREADS"] if not on_gpu else []
            if on_gpu:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_ids)
            else:
                env.pop("CUDA_VISIBLE_DEVICES", None)
                unset.append("CUDA_VISIBLE_DEVICES")
            secret = self.ray.put({"env": env, "unset": unset})
            argv = [ENGINE_MAIN_TOKEN if part == str(ENGINE_MAIN) else part for part in spec.argv()]
            pid = self._call(actor.start.remote(argv, [secret]), spec.name, "start vLLM")
        except (LaunchError, _Barred) as error:  # its node lost meanwhile, say: free the bundle
            for held in (actor, *leases):
                with contextlib.suppress(Exception):
                    self.ray.kill(held, no_restart=True)
            if isinstance(error, _Barred):
                raise NotPlacedYet(spec.name) from None
            raise
        child = RayChild(
            name=spec.name,
            actor=actor,
            actor_name=placement.actor + suffix,
            node=node,
            pid=pid,
            sink=sink,
            leases=leases,
            **self._verdicts(),
        )
        child.start_relay()
        self.children.append(child)
        return child, spec

    def _verdicts(self) -> dict[str, Any]:
        """What a child needs to wait for Ray's verdict when its actor stops answering."""
        return {
            "watch": self.watch,
            "verdict_timeout_s": self.config.node_verdict_timeout_s,
            "say": lambda line: self.say(line),  # the stack sets `say` after connecting
        }

    def _address(self, spec: EngineSpec, actor: Any, node: dict[str, Any]) -> EngineSpec:
        """The engine on its node: the node's address, ports free there, its group's coordinator."""
        host = node["ip"] if spec.host in (*_LOOPBACK, *_ANY) else spec.host
        group_key = (spec.instance, spec.group)
        wants_rpc = spec.rpc_port == 0 and group_key not in self._group_ports
        port = spec.port
        free = self._call(
            actor.free_ports.remote(host, int(port == 0) + int(wants_rpc)), spec.name, "pick free ports"
        )
        if port == 0:
            port = free.pop(0)
        rpc_port = spec.rpc_port
        dp_address = spec.data_parallel_address
        if spec.rpc_port is not None:
            if wants_rpc:
                self._group_ports[group_key] = (host, free.pop(0))
            dp_address, rpc_port = self._group_ports.get(group_key, (host, spec.rpc_port))
        return replace(spec, host=host, port=port, rpc_port=rpc_port, data_parallel_address=dp_address)

    def _call(self, ref: Any, name: str, what: str, timeout_s: float = _CALL_TIMEOUT_S) -> Any:
        """An actor call's result, or a LaunchError naming the engine or server and what failed."""
        try:
            return self.ray.get(ref, timeout=timeout_s)
        except self.ray.exceptions.GetTimeoutError:
            raise LaunchError(
                f"'{name}': could not {what} on the Ray cluster within {timeout_s:.0f} s",
                hint="`ray status` shows pending actors and what they wait for",
            ) from None
        except self.ray.exceptions.RayError as error:
            cause = getattr(error, "cause", None) or error
            raise LaunchError(
                f"'{name}': could not {what} on the Ray cluster: {type(cause).__name__}: {cause}",
                hint=(
                    "a node lost meanwhile is retried on the others; else the node needs this project "
                    "(and the engine's Python) at the same paths: docs/ray.md"
                ),
            ) from None

    def _ensure_group(self, name: str) -> None:
        """Return once the group holds all its bundles on live nodes that no verdict bars; else
        NotPlacedYet (try again soon), a new group when Ray has not re-placed it within _REVIVE_S,
        and a PlacementError once ray.capacity_wait_s has passed, or at once on a node Ray gave no
        verdict on (it neither declared it dead nor ran work there)."""
        from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

        assert self.placement is not None
        group = self.groups[name]
        try:
            table = placement_group_table(group)
        except Exception:
            table = {"state": "PENDING"}
        nodes = set((table.get("bundles_to_node_id") or {}).values())
        silent = nodes & self.watch.silent()
        if silent:
            raise PlacementError(
                f"placement group {self._group_names[name]} is on node {', '.join(sorted(silent))}, where an "
                f"actor of ours stopped answering and Ray, within ray.node_verdict_timeout_s "
                f"{self.config.node_verdict_timeout_s:g} s, neither declared the node dead nor ran work there; "
                "no restart is sent to a node Ray has not declared alive",
                group=name,
                missing=self.placement.group(name).needs(),
                hint="`ray status` and `ray list nodes` show the node; raise ray.node_verdict_timeout_s if "
                "the cluster's health checks are slower than Ray's defaults",
            )
        if nodes & self.watch.pending():
            raise NotPlacedYet(name)  # Ray's verdict on that node is still to come
        if table.get("state") == "CREATED" and all(
            is_node_alive(self.ray, node) and node not in self.watch.barred() for node in nodes
        ):
            if self._waiting.pop(name, None) is not None:
                self.say(f"placement group {self._group_names[name]} is placed again")
            return
        now = time.monotonic()
        since, _ = self._waiting.setdefault(name, (now, now - _SAY_EVERY_S))  # said at once
        needs = self.placement.group(name).needs()
        if table.get("state") == "REMOVED" or (
            now - since >= _REVIVE_S and self._group_names[name] == name and not self._lives_on(name)
        ):
            with contextlib.suppress(Exception):
                remove_placement_group(group)
            renewed = f"{name}-r{int(now - since)}"
            self.groups[name] = placement_group(
                [bundle.resources() for bundle in self.placement.group(name).bundles],
                strategy="STRICT_PACK",
                name=renewed,
            )
            self._group_names[name] = renewed
            self.say(
                f"placement group {name} was not re-placed within {_REVIVE_S:.0f} s: a new group {renewed}"
            )
        self._not_yet(name, f"placement group {self._group_names[name]}", needs)

    def _not_yet(self, key: str, what: str, needs: str) -> None:
        """NotPlacedYet (saying so every 10 s), or PlacementError once ray.capacity_wait_s has passed."""
        now = time.monotonic()
        since, said = self._waiting.setdefault(key, (now, now - _SAY_EVERY_S))  # said at once
        waited = now - since
        if waited > self.config.capacity_wait_s:
            raise PlacementError(
                f"{what} ({needs}) lost its node (node lost), and the nodes that remain have had no room "
                f"for it for {waited:.0f} s (ray.capacity_wait_s {self.config.capacity_wait_s:g}); "
                f"free now: {self._free_text()}",
                group=key,
                missing=needs,
                hint="add a node (or free resources), or raise ray.capacity_wait_s",
            )
        if now - said >= _SAY_EVERY_S:
            self._waiting[key] = (since, now)
            self.say(
                f"waiting for capacity: {what} needs {needs} after a node lost ({waited:.0f} s of "
                f"ray.capacity_wait_s {self.config.capacity_wait_s:g}; free now: {self._free_text()})"
            )
        raise NotPlacedYet(key)

    def _lives_on(self, name: str) -> bool:
        """Some engine of ours still runs on this group (removing it would end that engine)."""
        assert self.placement is not None
        engines = set(self.placement.group(name).engines)
        return any(child.name in engines and child.exit_code() is None for child in self.children)

    def _free_text(self) -> str:
        try:
            nodes = self.free_capacity()
        except Exception:
            return "unknown"
        return ", ".join(f"{node.name}: {node.gpus:g} GPU {node.cpus:g} CPU" for node in nodes) or "no nodes"

    # -- servers ---------------------------------------------------------------------------------

    def listen(
        self, name: str, host: str, port: int, num_cpus: float, *, node_id: str | None = None
    ) -> tuple[str, int]:
        """A server actor binds its socket on its node; the address the others will use comes back.

        A loopback `host` stays loopback (`ray.servers_listen_on: loopback`, the default): the
        actor is then pinned to ng_run's own node, where the head server, the other servers and
        the collector reach it. `node` (or a `host` of 0.0.0.0) binds the node's address, on
        `node_id` when given (a restart: a node Ray lists alive that no verdict bars)."""
        from ng_cli.launcher.ray.actors import ProcessHost

        assert self.placement is not None
        attempt = self._restarts.get(name, 0)
        actor_name = self.placement.server_actor(name) + (f"-r{attempt}" if attempt else "")
        on_loopback = host in _LOOPBACK and self.config.servers_listen_on == "loopback"
        options: dict[str, Any] = {"name": actor_name, "num_cpus": num_cpus}
        if on_loopback or node_id is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            where = str(self.ray.get_runtime_context().get_node_id() if on_loopback else node_id)
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=where, soft=False)
        actor = ProcessHost.options(**options).remote(name)
        self.actors.append(actor)
        self._actor_names.append(actor_name)
        node = self._call(actor.node.remote(), name, "start its actor", self.config.placement_timeout_s)
        bind_host = host if on_loopback or host not in (*_LOOPBACK, *_ANY) else node["ip"]
        bound = self._call(actor.listen.remote(bind_host, port), name, f"bind {bind_host}:{port}")
        self._servers[name] = (actor, actor_name, node)
        return bind_host, int(bound)

    def replace_server(self, name: str, host: str, port: int, num_cpus: float) -> tuple[str, int]:
        """A new actor for a server whose node was lost, on a node with room: the same port where
        it is free there (so the URL the others know stays right where the address does too).
        NotPlacedYet while no live node has room; PlacementError past ray.capacity_wait_s."""
        barred = self.watch.barred()
        room = sorted(
            (
                node
                for node in self.free_capacity()
                if node.key not in barred and node.cpus + 1e-9 >= num_cpus
            ),
            key=lambda node: -node.cpus,
        )
        if not room:
            self._not_yet(f"server {name}", f"server actor '{name}'", f"{num_cpus:g} CPU on one node")
        self._waiting.pop(f"server {name}", None)
        self._restarts[name] = self._restarts.get(name, 0) + 1
        node_id = room[0].key
        try:
            return self.listen(name, host, port, num_cpus, node_id=node_id)
        except LaunchError:  # the port is taken on the new node: any free one
            with contextlib.suppress(Exception):
                self.ray.kill(self.actors[-1], no_restart=True)  # the actor that could not bind
            self._restarts[name] += 1
            return self.listen(name, host, 0, num_cpus, node_id=node_id)

    def start_server(
        self,
        name: str,
        command: tuple[str, ...],
        spec: dict[str, Any],
        *,
        sink: LineSink,
        redact: Callable[[str], str],
    ) -> RayChild:
        """The server child on its actor's node, reading its spec (secrets included) from the object store."""
        actor, actor_name, node = self._servers[name]
        secret = self.ray.put({"spec": spec, "cwd": os.getcwd()})
        argv = ["{python}", *command[1:-1]]  # the spec path is the actor's own file
        pid = self._call(actor.start.remote(argv, [secret]), name, "start the server")
        child = RayChild(
            name=name,
            actor=actor,
            actor_name=actor_name,
            node=node,
            pid=pid,
            sink=sink,
            redact=redact,
            **self._verdicts(),
        )
        child.start_relay()
        self.children.append(child)
        return child

    # -- the end ---------------------------------------------------------------------------------

    def stop(self, *, grace_s: float = 3.0) -> str:
        """End our processes (SIGTERM, then SIGKILL), kill our actors, remove our groups, disconnect.

        Only what this run created is touched (other jobs' actors and groups stay); returns a line
        saying what was removed, or what the cluster still lists after a few seconds."""
        if self._stopped:
            return ""
        self._stopped = True
        from ray.util.placement_group import remove_placement_group

        for child in self.children:
            child.expect_end()
        calls = []
        for child in self.children:
            with contextlib.suppress(Exception):
                calls.append(child.actor.stop.remote(grace_s))
        with contextlib.suppress(Exception):
            self.ray.wait(calls, num_returns=len(calls), timeout=grace_s + 3.0)
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor, no_restart=True)
        for group in self.groups.values():
            with contextlib.suppress(Exception):
                remove_placement_group(group)
        left = self._left_behind()
        for child in self.children:
            child.wait(1.0)
        run = self.placement.run_id if self.placement is not None else "?"
        self.ray.shutdown()  # `local`: stops the private cluster's processes too
        if left:
            return f"warning: the Ray cluster still lists {', '.join(left)} of run {run}"
        actors, groups = len(self.actors), len(self.groups)
        return (
            f"removed {actors} actor{'s' * (actors != 1)} and {groups} placement group{'s' * (groups != 1)} "
            f"of run {run}"
        )

    def _left_behind(self, timeout_s: float = 3.0) -> list[str]:
        """Our actors and groups the cluster still lists as alive (kills and removals are asynchronous)."""
        from ray.util.placement_group import placement_group_table

        ours = {name for name in self._actor_names}
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                actors = {
                    entry["name"]
                    for entry in self.ray.util.list_named_actors(all_namespaces=True)
                    if entry["namespace"] == self.config.namespace and entry["name"] in ours
                }
                groups = {
                    entry["name"]
                    for entry in placement_group_table().values()
                    if entry["name"] in set(self._group_names.values()) and entry["state"] != "REMOVED"
                }
            except Exception:  # the cluster is gone (a local one whose processes were killed)
                return []
            if (not actors and not groups) or time.monotonic() > deadline:
                return sorted(actors | groups)
            time.sleep(0.1)


class _Barred(Exception):
    """An engine's restart landed on a node no restart may go to (its group moved meanwhile)."""


def _check_reachable(address: str) -> None:
    """LaunchError at once when nothing listens at `host:port` (`auto` is Ray's to find)."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=_REACH_TIMEOUT_S).close()
    except (OSError, ValueError) as error:
        raise LaunchError(
            f"ray.address {address}: nothing answers at {host}:{port} ({error})",
            hint="`ray status` on a node of the cluster shows its address; `local` starts a private cluster",
        ) from None
