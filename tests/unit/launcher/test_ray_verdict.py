"""Ray's verdict on an actor that stopped answering (issue 42), against a scripted cluster.

The cluster's answers are scripted per ask (0.25 s apart on a clock the test advances): Ray's
default health checks declare a killed node dead about 15 s (60 asks) after its actor's calls
began to fail, far past the 5.5 s ng_run used to give it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from ng_cli.launcher.ray.verdict import ActorState, NodeWatch, Verdict, await_verdict

NODE = "n" * 56
ALIVE = ActorState(state="ALIVE", node_died=False)
WORKER_DIED = ActorState(state="DEAD", node_died=False)
NODE_DIED = ActorState(state="DEAD", node_died=True)


@dataclass
class _Cluster:
    """Answers as Ray would: the node alive until `node_dead_at` asks, the actor's state from
    `actor_states` (the last one repeats), a probe that runs after `probe_runs_at` asks (None: never)."""

    node_dead_at: int | None = None
    actor_states: list[ActorState | None] = field(default_factory=lambda: [ALIVE])
    probe_runs_at: int | None = None
    asks: int = 0
    probes: int = 0

    def is_node_alive(self, node_id: str) -> bool:
        assert node_id == NODE
        self.asks += 1
        return self.node_dead_at is None or self.asks < self.node_dead_at

    def actor_state(self, _actor: Any) -> ActorState | None:
        return self.actor_states[min(self.asks, len(self.actor_states)) - 1]

    def start_probe(self, node_id: str) -> Any:
        self.probes += 1
        return node_id

    def probe_ran(self, _probe: Any) -> bool | None:
        return True if self.probe_runs_at is not None and self.asks >= self.probe_runs_at else None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _verdict(cluster: _Cluster, *, timeout_s: float = 120.0) -> tuple[Verdict, float]:
    clock = _Clock()
    verdict = await_verdict(cluster, object(), NODE, deadline=timeout_s, clock=clock, sleep=clock.sleep)
    return verdict, clock.now


def test_a_node_ray_declares_dead_after_its_default_detection_is_lost() -> None:
    """The issue's case: the actor's calls fail at once, the actor table says ALIVE, the node is
    listed alive for 15 s; the verdict waits for Ray (the old 5.5 s of checks called it a death)."""
    verdict, waited_s = _verdict(_Cluster(node_dead_at=61))

    assert verdict is Verdict.LOST
    assert waited_s == pytest.approx(15.0)


def test_a_worker_death_reported_by_a_raylet_that_then_died_is_lost() -> None:
    """The raylet reported its worker dead (WORKER_DIED) and died a moment later: its node never
    runs the probe, and Ray declares it dead after its health checks."""
    verdict, _ = _verdict(_Cluster(node_dead_at=61, actor_states=[WORKER_DIED]))

    assert verdict is Verdict.LOST


def test_the_actor_table_s_node_died_is_lost_at_once() -> None:
    assert _verdict(_Cluster(actor_states=[ALIVE, ALIVE, NODE_DIED])) == (Verdict.LOST, 0.5)


def test_an_actor_that_died_on_a_node_that_runs_work_died_there() -> None:
    """Killed, out of memory, its worker process gone: the probe ran on the node, so it lives."""
    verdict, _ = _verdict(_Cluster(actor_states=[WORKER_DIED], probe_runs_at=3))

    assert verdict is Verdict.DIED


def test_an_actor_still_alive_on_a_node_that_runs_work_answers_again() -> None:
    """A passing failure (Ray's ActorUnavailableError on a network blip): the relay polls again."""
    assert _verdict(_Cluster(probe_runs_at=2))[0] is Verdict.ANSWERS


def test_calls_that_keep_failing_past_the_bound_have_no_verdict() -> None:
    """Alive in the actor table, its node runs work, yet its calls failed since the deadline: the
    relay's next poll would fail again; it stops asking instead of looping."""
    assert _verdict(_Cluster(probe_runs_at=1), timeout_s=0.0)[0] is Verdict.NONE


def test_without_an_actor_table_a_failure_on_a_live_node_is_a_death() -> None:
    """A Ray Client connection cannot read the actor table: the node's word decides."""
    assert _verdict(_Cluster(actor_states=[None], probe_runs_at=1))[0] is Verdict.DIED


def test_no_verdict_within_the_timeout_is_said_so() -> None:
    verdict, waited_s = _verdict(_Cluster(), timeout_s=30.0)

    assert verdict is Verdict.NONE
    assert waited_s == pytest.approx(30.0)


def test_a_stopping_stack_does_not_wait() -> None:
    cluster = _Cluster()
    assert await_verdict(cluster, object(), NODE, deadline=120.0, should_stop=lambda: True) is Verdict.NONE
    assert cluster.asks == 0


def test_the_watch_bars_a_node_until_ray_has_run_work_there() -> None:
    watch = NodeWatch()
    watch.suspect(NODE)
    watch.suspect(NODE)  # two actors of ours on it
    assert watch.pending() == {NODE}
    assert watch.barred() == {NODE}

    watch.settle(NODE, Verdict.NONE)
    assert watch.pending() == {NODE}  # the other actor's verdict is still to come
    assert watch.silent() == {NODE}

    watch.settle(NODE, Verdict.DIED)  # Ray ran work there: alive again
    assert watch.barred() == set()

    watch.suspect(NODE)
    watch.settle(NODE, Verdict.LOST)
    assert watch.barred() == {NODE}  # for good: a lost node's id never comes back
