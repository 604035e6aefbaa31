"""Engines on the same GPU start one after another; engines on their own GPUs start together.

vLLM sizes its KV cache from the memory left free on the device while it starts, so two replicas
starting together on one GPU can count each other's allocations as their own (an H100 run failed
that way). Stand-in engines (the stub vLLM server, one process each) show the order the fleet
spawns them in, at start and when both die and restart.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest

from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.plan import EngineSpec, InstanceEngines, plan_engines
from ng_cli.launcher.engines import EngineFleet
from tests.fixtures.caps import HANG_CAP_S

STUB = Path(__file__).resolve().parents[2] / "fixtures" / "stub_vllm.py"


def _plan(tmp_path: Path, devices: tuple[str, ...], replicas_per_device: int) -> InstanceEngines:
    model = tmp_path / "m"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 64}))
    config = LocalVllmModelConfig.model_validate(
        {
            "model": str(model),
            "return_token_id_information": False,
            "uses_reasoning_parser": False,
            "replicas_per_device": replicas_per_device,
            "vllm_serve_kwargs": {"data_parallel_size": 2, "gpu_memory_utilization": 0.4},
        }
    )
    engines = plan_engines(
        "policy", config, env={}, devices=devices, python=sys.executable, source="conf/m.yaml:3", api_key="k"
    )
    held = [socket.create_server(("127.0.0.1", 0)) for _ in range(engines.ports_needed()[0])]
    ports = [sock.getsockname()[1] for sock in held]
    for sock in held:
        sock.close()
    return engines.with_ports(ports, range(0))


@pytest.fixture
def stub_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        EngineSpec,
        "argv",
        lambda self: [sys.executable, str(STUB), "--port", str(self.port), "--model", self.served_model_name],
    )


def _fleet(plan: InstanceEngines, said: list[str], spawns: list[tuple[str, list[str]]]) -> EngineFleet:
    """Records (engine spawned, the engines serving at that moment) through `before_spawn`."""

    def record(spec: EngineSpec) -> None:
        spawns.append(
            (spec.name, [engine.spec.name for engine in fleet.engines if engine.ready_s is not None])
        )

    fleet = EngineFleet((plan,), sink=lambda _name, line: said.append(line), before_spawn=record)
    return fleet


def _stop(fleet: EngineFleet) -> None:
    fleet.stop_restarting()
    for child in fleet.children:
        child.kill()
        child.wait(5.0)


@pytest.mark.usefixtures("stub_engines")
def test_two_replicas_on_one_gpu_start_one_after_the_other(tmp_path: Path) -> None:
    said: list[str] = []
    spawns: list[tuple[str, list[str]]] = []
    fleet = _fleet(_plan(tmp_path, ("0",), replicas_per_device=2), said, spawns)
    try:
        fleet.start()
        assert spawns == [("policy/engine-0", [])]  # engine-1 waits
        assert any(
            "policy/engine-1 starts once policy/engine-0 is ready: they share GPU 0" in line for line in said
        )
        ready = fleet.wait_ready()
        assert set(ready) == {"policy/engine-0", "policy/engine-1"}
        assert spawns == [("policy/engine-0", []), ("policy/engine-1", ["policy/engine-0"])]

        # Both die: the restarts are spaced the same way.
        for child in fleet.children:
            child.kill()
        deadline = time.monotonic() + HANG_CAP_S
        while len(spawns) < 4 or not all(engine.ready_s is not None for engine in fleet.engines):
            assert time.monotonic() < deadline, said[-5:]
            fleet.poll()
            time.sleep(0.1)
        (first, serving_then), (second, serving_later) = spawns[2:]
        assert serving_then == []
        assert serving_later == [first]
        assert second != first
    finally:
        _stop(fleet)


@pytest.mark.usefixtures("stub_engines")
def test_replicas_on_their_own_gpus_start_together(tmp_path: Path) -> None:
    said: list[str] = []
    spawns: list[tuple[str, list[str]]] = []
    fleet = _fleet(_plan(tmp_path, ("0", "1"), replicas_per_device=1), said, spawns)
    try:
        fleet.start()
        assert spawns == [("policy/engine-0", []), ("policy/engine-1", [])]
        fleet.wait_ready()
        assert not any("starts once" in line for line in said)
    finally:
        _stop(fleet)
