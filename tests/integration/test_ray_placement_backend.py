"""`RayBackend` on a private Ray cluster that declares 4 GPUs (Ray schedules them like real ones): two
TP-2 engines get their placement groups, each engine's actor plus one GPU lease learn their bundles'
GPU ids, and each engine process sees exactly its two GPUs; the key reaches its environment, never its
argv; a killed engine starts again as a new actor on the same group; stop removes every actor (leases
included) and group.

The "engine" is a stand-in interpreter (a shell script that prints what it was given), since the GPU
path is about placement and environment, not vLLM. The scenario runs in a child interpreter, which
owns the Ray driver, and prints its findings as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.ray_required import require_ray

pytestmark = [pytest.mark.integration, pytest.mark.ray]
require_ray()

_FAKE_ENGINE = """#!/bin/sh
echo "argv: $*"
echo "gpus: $CUDA_VISIBLE_DEVICES"
echo "key: ${VLLM_API_KEY:+set}"
exec sleep 120
"""

_SCENARIO = """
import json, sys, time
from pathlib import Path
from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.placement import plan_placement
from ng_cli.engines.plan import plan_engines
from ng_cli.launcher.ray.backend import RayBackend
from ng_cli.launcher.ray.config import RayConfig

model, engine_python = sys.argv[1], sys.argv[2]
config = LocalVllmModelConfig.model_validate({
    "model": model, "return_token_id_information": False, "uses_reasoning_parser": False,
    "engine_python": engine_python,
    "vllm_serve_kwargs": {"tensor_parallel_size": 2, "data_parallel_size": 2},
})
engines = plan_engines("policy", config, env={}, devices=("0", "1", "2", "3"), python=engine_python, api_key="sk-ray-KEY")
placement = plan_placement([engines], run_id="t1")
backend = RayBackend.connect(RayConfig(address="local", num_cpus=4, num_gpus=4, object_store_memory_mb=80))
lines = {}
def sink(name, line):
    lines.setdefault(name, []).append(line)
backend.place(placement)
children = {}
specs = {}
for spec in engines.engines:
    children[spec.name], specs[spec.name] = backend.start_engine(spec, engines, sink)
def wait_lines(name, count):
    deadline = time.monotonic() + 300
    while len(lines.get(name, [])) < count and time.monotonic() < deadline:
        time.sleep(0.1)
for name in children:
    wait_lines(name, 3)
first = {name: list(found) for name, found in lines.items()}
locations = {name: child.location() for name, child in children.items()}
urls = {name: spec.base_url for name, spec in specs.items()}
restarted = "policy/engine-0"
children[restarted].kill()
lines[restarted] = []
child, _ = backend.start_engine(specs[restarted], engines, sink)
wait_lines(restarted, 3)
said = backend.stop(grace_s=1.0)
print(json.dumps({"lines": first, "again": lines[restarted], "locations": locations, "urls": urls,
                  "restarted_actor": child.actor_name, "stop": said}))
"""


def test_gpu_engines_get_their_groups_gpus_and_restart_on_them(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 64}))
    engine = tmp_path / "fake_engine.sh"
    engine.write_text(_FAKE_ENGINE)
    engine.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-c", _SCENARIO, str(model), str(engine)],
        capture_output=True, text=True, timeout=240, check=False, env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])

    gpus = {
        name: next(line for line in lines if line.startswith("gpus:"))
        for name, lines in found["lines"].items()
    }
    sets = [set(text.removeprefix("gpus: ").split(",")) for text in gpus.values()]
    assert [len(ids) for ids in sets] == [2, 2], gpus  # the actor's GPU and its lease's
    assert not sets[0] & sets[1], gpus  # two engines never share a GPU
    for lines in found["lines"].values():
        assert "key: set" in lines
        argv = next(line for line in lines if line.startswith("argv:"))
        assert "sk-ray-KEY" not in argv
        assert "--tensor-parallel-size 2" in argv
    assert {location["actor"] for location in found["locations"].values()} == {
        "ng-t1-policy-engine-0",
        "ng-t1-policy-engine-1",
    }
    node = found["locations"]["policy/engine-0"]["node"]
    assert found["urls"]["policy/engine-0"].startswith(f"http://{node}:")  # served at its node's address
    assert found["restarted_actor"] == "ng-t1-policy-engine-0-r1"
    assert any(line.startswith("gpus: ") and len(line.split(",")) == 2 for line in found["again"])
    # 2 engines, 1 restart, each with one lease: 6 actors; both groups
    assert found["stop"] == "removed 6 actors and 2 placement groups of run t1"


_MISSING_ENGINE = """
import sys
from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.placement import plan_placement
from ng_cli.engines.plan import plan_engines
from ng_cli.errors import LaunchError
from ng_cli.launcher.ray.backend import RayBackend
from ng_cli.launcher.ray.config import RayConfig

config = LocalVllmModelConfig.model_validate({
    "model": sys.argv[1], "return_token_id_information": False, "uses_reasoning_parser": False,
    "engine_python": "/nonexistent/vllm-venv/bin/python",
})
engines = plan_engines("policy", config, env={}, devices=(), python="unused", api_key="k")
backend = RayBackend.connect(RayConfig(address="local", num_cpus=2, object_store_memory_mb=80))
try:
    backend.place(plan_placement([engines], run_id="t2"))
    backend.start_engine(engines.engines[0], engines, lambda name, line: None)
except LaunchError as error:
    print("LaunchError:", error)
finally:
    print(backend.stop(grace_s=0.5))
"""


def test_an_engine_python_missing_on_the_node_is_a_launch_error_naming_the_engine(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 64}))
    done = subprocess.run(
        [sys.executable, "-c", _MISSING_ENGINE, str(model)],
        capture_output=True, text=True, timeout=240, check=False, env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert (
        "LaunchError: 'policy/engine-0': could not start vLLM on the Ray cluster: FileNotFoundError:"
        in done.stdout
    )
    assert "/nonexistent/vllm-venv/bin/python" in done.stdout
    assert "removed 1 actor and 1 placement group of run t2" in done.stdout
