"""Ray's verdict on an actor of ours that stopped answering: its node lost, or it died on a live node.

A call to an actor fails within a second or two of its process dying, but Ray declares the node
dead only once its raylet has missed its health checks: about 15 s later with Ray's defaults
(5 checks 3 s apart) when the raylet was killed, up to about 65 s when the host vanished without a
word (each check may wait 10 s). Until then the failure says nothing about the node, and a guess
costs dearly either way: a server taken for dead on a live node stops the run, and a restart sent
to a node that is in fact gone burns one of the engine's restarts. So the relay that saw the
failure waits here for Ray's word, up to `ray.node_verdict_timeout_s`:

    Ray lists the node dead, or the actor dead of NODE_DIED       -> LOST: restarted on another node
    a probe task pinned to the node ran there, the actor dead     -> DIED: as a local process's death
      (killed, out of memory, its worker process gone)
    the probe ran, the actor still alive                          -> ANSWERS: the failure was passing
    none of these in time                                         -> NONE: ng_run stops, naming both

The probe is Ray's own word that the node runs work (a zero-CPU task with a hard affinity to it): a
raylet that reported its worker's death and died a moment later never runs it, and Ray fails it
once it declares the node dead. `NodeWatch` keeps the nodes no restart may go to: those lost, those
whose verdict is pending, and those Ray gave none on.
"""

from __future__ import annotations

import enum
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ActorState", "Cluster", "NodeWatch", "RayCluster", "Verdict", "await_verdict", "is_node_alive"]

_EVERY_S = 0.25
"""How often the cluster is asked while a verdict is pending."""


class Verdict(enum.Enum):
    LOST = "node lost"
    DIED = "died on a live node"
    ANSWERS = "answers again"
    NONE = "no verdict"


@dataclass(frozen=True)
class ActorState:
    """What Ray's actor table says of one actor."""

    state: str
    """ALIVE, DEAD, RESTARTING, PENDING_CREATION, DEPENDENCIES_UNREADY."""
    node_died: bool
    """Dead because its node was declared dead."""


class Cluster(Protocol):
    """What a verdict asks of the cluster (`RayCluster` on Ray; tests give their own)."""

    def is_node_alive(self, node_id: str) -> bool: ...

    def actor_state(self, actor: Any) -> ActorState | None:
        """None when the actor table cannot be read (a Ray Client connection)."""
        ...

    def start_probe(self, node_id: str) -> Any: ...

    def probe_ran(self, probe: Any) -> bool | None:
        """True once the probe ran on its node, False if it failed, None while it waits."""
        ...


def await_verdict(
    cluster: Cluster,
    actor: Any,
    node_id: str,
    *,
    deadline: float,
    should_stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Verdict:
    """Ask until Ray says what became of `actor` and its node, or `deadline` (on `clock`) passes."""
    probe: Any = None
    while not should_stop():
        if not cluster.is_node_alive(node_id):
            return Verdict.LOST
        state = cluster.actor_state(actor)
        if state is not None and state.node_died:
            return Verdict.LOST
        if probe is None:
            probe = cluster.start_probe(node_id)
        ran = cluster.probe_ran(probe)
        if ran:
            # No actor table to read (Ray Client): a call that failed on a live node is a death.
            if state is None or state.state == "DEAD":
                return Verdict.DIED
            # Alive, and its node runs work: a passing failure, unless its calls fail past the bound.
            return Verdict.ANSWERS if clock() < deadline else Verdict.NONE
        if ran is False:  # failed without running (its node going away, say): a new one next round
            probe = None
        if clock() >= deadline:
            return Verdict.NONE
        sleep(_EVERY_S)
    return Verdict.NONE


def is_node_alive(ray: Any, node_id: str) -> bool:
    """False once the cluster has marked the node dead (its raylet gone: preempted, crashed, removed)."""
    try:
        nodes = ray.nodes()
    except Exception:  # the cluster itself is gone: nothing to tell
        return True
    return any(node.get("NodeID") == node_id and node.get("Alive") for node in nodes)


class RayCluster:
    """`Cluster` over a connected Ray: its node list, its actor table, probe tasks."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray

    def is_node_alive(self, node_id: str) -> bool:
        return is_node_alive(self.ray, node_id)

    def actor_state(self, actor: Any) -> ActorState | None:
        try:
            # The GCS's actor table; Ray's State API (`ray.util.state`) would need ray[default].
            info = self.ray._private.state.actors(actor_id=actor._actor_id.hex())
        except Exception:
            return None
        if not info:
            return None
        cause = info.get("DeathCause")
        node_died = False
        if cause is not None and cause.HasField("actor_died_error_context"):
            context = cause.actor_died_error_context
            node_died = context.Reason.Name(context.reason) == "NODE_DIED"
        return ActorState(state=str(info.get("State")), node_died=node_died)

    def start_probe(self, node_id: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from ng_cli.launcher.ray.actors import NodeProbe

        strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        return NodeProbe.options(scheduling_strategy=strategy).remote(), node_id

    def probe_ran(self, probe: Any) -> bool | None:
        ref, node_id = probe
        done, _ = self.ray.wait([ref], timeout=0)
        if not done:
            return None
        try:
            return bool(self.ray.get(ref) == node_id)
        except Exception:  # unschedulable (the node declared dead), or its worker failed to start
            return False


class NodeWatch:
    """The nodes no restart may go to, shared by the relays (threads) and the backend: lost, an
    actor there stopped answering and Ray's verdict is pending, or Ray gave none in time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: Counter[str] = Counter()
        self._lost: set[str] = set()
        self._silent: set[str] = set()

    def suspect(self, node_id: str) -> None:
        """An actor on the node stopped answering: a verdict is pending."""
        with self._lock:
            self._pending[node_id] += 1

    def settle(self, node_id: str, verdict: Verdict) -> None:
        with self._lock:
            self._pending[node_id] -= 1
            if self._pending[node_id] <= 0:
                del self._pending[node_id]
            if verdict is Verdict.LOST:
                self._lost.add(node_id)
                self._silent.discard(node_id)
            elif verdict is Verdict.NONE:
                self._silent.add(node_id)
            else:  # Ray ran work there: alive
                self._silent.discard(node_id)

    def pending(self) -> set[str]:
        with self._lock:
            return set(self._pending)

    def silent(self) -> set[str]:
        """Nodes Ray neither declared dead nor showed running work within the verdict timeout."""
        with self._lock:
            return set(self._silent)

    def barred(self) -> set[str]:
        with self._lock:
            return set(self._pending) | self._lost | self._silent
