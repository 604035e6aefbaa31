"""A restart that cannot start yet, or fails to start, does not end the stack (issue 29).

On Ray an engine whose node was lost may find no room on the nodes that remain (its starter
answers NotPlacedYet: tried again, no restart counted) or fail to start (its new node lost too:
that restart counts, the next one follows); every configured restart is tried before ng_run
stops. A restart on another node serves at a new URL, which the endpoint file publishes. Stand-in
engines (the stub vLLM server) and a starter that refuses on cue; the clock jumps over backoffs.
"""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import pytest

from ng_cli.engines.plan import EngineSpec, InstanceEngines
from ng_cli.errors import LaunchError, PlacementError
from ng_cli.launcher.engines import EngineFleet, NotPlacedYet
from ng_cli.launcher.process import Handle, LineSink
from tests.unit.launcher.test_engines_sharing_a_gpu import _plan, _stop, stub_engines

__all__ = ["stub_engines"]  # the fixture, used by name


class _Clock:
    def __init__(self) -> None:
        import time

        self.time = time
        self.offset = 0.0

    def __call__(self) -> float:
        return self.time.monotonic() + self.offset


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return int(sock.getsockname()[1])


def _fleet(
    plan: InstanceEngines, answers: list[str], said: list[str], clock: _Clock
) -> tuple[EngineFleet, list[int]]:
    """A fleet whose restarts answer, in turn, `answers`: wait, fail, room (then start, on a new port)."""
    ports: list[int] = []

    def starter(spec: EngineSpec, plan: InstanceEngines, sink: LineSink) -> tuple[Handle, EngineSpec]:
        answer = answers.pop(0) if answers else "start"
        if answer == "wait":
            raise NotPlacedYet(spec.name)
        if answer == "fail":
            raise LaunchError(f"'{spec.name}': could not start its actor on the Ray cluster: node lost")
        if answer == "stop":
            raise PlacementError("no room", group="g", missing="1 CPU on one node")
        moved = replace(spec, port=_free_port())  # another node: another address
        ports.append(moved.port)
        return fleet._start_local(moved, plan, sink)

    fleet = EngineFleet((plan,), sink=lambda _name, line: said.append(line), clock=clock, starter=starter)
    return fleet, ports


def _one_engine(tmp_path: Path, max_restarts: int) -> InstanceEngines:
    plan = _plan(tmp_path, (), replicas_per_device=1)
    return replace(
        plan,
        engines=plan.engines[:1],
        max_restarts=max_restarts,
        endpoint_file=str(tmp_path / "policy.endpoints"),
    )


def _restart_until(fleet: EngineFleet, clock: _Clock, done: int) -> None:
    """Poll, jumping over backoffs, until `done` restarts are counted and the engine serves."""
    for _ in range(400):
        fleet.poll()
        clock.offset += 0.5
        engine = fleet.engines[0]
        if fleet.restarts.get(engine.key, 0) >= done and engine.ready_s is not None:
            return
        clock.time.sleep(0.05)
    pytest.fail("the engine did not serve again")


def _poll_until_it_raises(fleet: EngineFleet, clock: _Clock) -> None:
    for _ in range(400):
        fleet.poll()
        clock.offset += 0.5
        clock.time.sleep(0.01)


@pytest.mark.usefixtures("stub_engines")
def test_a_restart_waits_for_room_then_retries_a_failed_start_and_publishes_the_new_url(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    clock = _Clock()
    plan = _one_engine(tmp_path, max_restarts=3)
    answers = ["start", "wait", "wait", "fail"]
    fleet, ports = _fleet(plan, answers, said, clock)
    try:
        fleet.start()
        fleet.wait_ready()
        endpoints = tmp_path / "policy.endpoints"
        assert endpoints.read_text() == f"http://127.0.0.1:{ports[0]}/v1\n"

        fleet.children[0].kill()
        _restart_until(fleet, clock, done=2)
        assert answers == []
        # Two waits for room counted nothing; the failed start counted restart 1, the start restart 2.
        assert fleet.restarts[fleet.engines[0].key] == 2
        assert any("restart 1 failed" in line and "node lost" in line for line in said), said
        assert endpoints.read_text() == f"http://127.0.0.1:{ports[-1]}/v1\n"
        assert ports[-1] != ports[0]
        assert any("serving again" in line for line in said)
    finally:
        _stop(fleet)


@pytest.mark.usefixtures("stub_engines")
def test_every_configured_restart_is_tried_before_the_stack_stops(tmp_path: Path) -> None:
    said: list[str] = []
    clock = _Clock()
    fleet, _ = _fleet(_one_engine(tmp_path, max_restarts=2), ["start", "fail", "fail"], said, clock)
    try:
        fleet.start()
        fleet.wait_ready()
        fleet.children[0].kill()
        with pytest.raises(
            LaunchError, match=r"could not be restarted after 2 restart\(s\) \(max_restarts 2\)"
        ):
            _poll_until_it_raises(fleet, clock)
        assert sum("failed" in line for line in said) == 1  # restart 1 failed; restart 2's failure stops
    finally:
        _stop(fleet)


@pytest.mark.usefixtures("stub_engines")
def test_no_room_within_the_capacity_wait_stops_with_the_reason(tmp_path: Path) -> None:
    clock = _Clock()
    fleet, _ = _fleet(_one_engine(tmp_path, max_restarts=3), ["start", "wait", "stop"], [], clock)
    try:
        fleet.start()
        fleet.wait_ready()
        fleet.children[0].kill()
        with pytest.raises(PlacementError, match="no room"):
            _poll_until_it_raises(fleet, clock)
    finally:
        _stop(fleet)
