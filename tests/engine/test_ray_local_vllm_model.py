"""local_vllm_model on a real local Ray cluster (`ray.address: local`): the example environment, its
agent and the model server run as Ray actors, and two CPU vLLM engines of models/tiny-weather run as
actors in placement groups; rollouts are collected; killing one engine's actor fails its sessions
over (no rollout lost) and the engine policy restarts it; Ctrl-C leaves no actor, no placement
group and no process (the private cluster's own processes included: every one of them carries the
test's marker in its environment, inherited from ng_run).

The same scenario as test_local_vllm_model.py, run through the Ray placement backend.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ng_cli.quickstart.plan import EXAMPLE_AGENT
from ng_cli.toolchain.local_vllm import is_vllm_env_ready, vllm_venv_dir
from tests.fixtures.engine_stack import ENGINE_KEY, EXAMPLE_ENV_CONFIG, engine_stack, kill_one_engine_mid_run
from tests.fixtures.ray_required import require_ray
from tests.fixtures.stack_process import console_script

CPU_CONFIG = "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml"
ENVIRONMENT = "example_single_tool_call"


def _require(available: bool, reason: str) -> None:
    if available:
        return
    if os.environ.get("NG_REQUIRE_ENGINE", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"NG_REQUIRE_ENGINE is set and {reason}", pytrace=False)
    pytest.skip(reason)


def _kill_actor(engine: dict[str, Any]) -> None:
    """SIGKILL the Ray worker process of the engine's actor (what a lost node or an OOM kill does)."""
    os.kill(int(engine["actor_pid"]), signal.SIGKILL)


def test_ray_local_cluster_engines_and_servers_as_actors_one_actor_killed_nothing_lost(
    tmp_path: Path,
) -> None:
    _require(is_vllm_env_ready(), f"the CPU vLLM env is not built at {vllm_venv_dir()}")
    require_ray()
    overrides = [
        f"++{ENGINE_KEY}.vllm_serve_kwargs.data_parallel_size=2",
        f"++{ENGINE_KEY}.max_restarts=2",
        f"++{ENGINE_KEY}.health_probe_interval_s=1",
        "++ray.address=local",
        f"++ray.servers=[{ENVIRONMENT},{EXAMPLE_AGENT}]",
        "++ray.num_cpus=6",  # logical CPUs: 2 engine bundles + 2 server actors, on a 2-core machine
        "++ray.object_store_memory_mb=100",
    ]
    with engine_stack(tmp_path, [EXAMPLE_ENV_CONFIG, CPU_CONFIG], overrides) as stack:
        ready = stack.process.ready
        servers = {server["name"]: server for server in ready["servers"]}
        run_id = ready["ray"]["run_id"]
        assert servers[ENVIRONMENT]["actor"] == f"ng-{run_id}-server-{ENVIRONMENT}"
        assert servers[EXAMPLE_AGENT]["actor"] == f"ng-{run_id}-server-{EXAMPLE_AGENT}"
        assert servers["policy_model"]["actor"] is None  # not listed in ray.servers: a local child
        assert ready["ray"]["placement_groups"] == [
            f"ng-{run_id}-policy_model-g0",
            f"ng-{run_id}-policy_model-g1",
        ]
        engines = stack.engines
        assert [engine["actor"] for engine in engines] == [
            f"ng-{run_id}-policy_model-engine-0",
            f"ng-{run_id}-policy_model-engine-1",
        ]
        assert all(engine["node"] and engine["actor_pid"] != engine["pid"] for engine in engines)
        status = subprocess.run(
            [str(console_script("ng_status")), f"+head_server_url={stack.process.head_url}"],
            env={**stack.env, "COLUMNS": "400"}, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert status.returncode == 0, status.stdout + status.stderr
        for name in (f"ng-{run_id}-policy_model-engine-1", f"ng-{run_id}-server-{ENVIRONMENT}"):
            assert name in status.stdout.replace("\n", ""), status.stdout  # node and actor per row

        figures = kill_one_engine_mid_run(
            stack,
            kill=_kill_actor,
            exit_report=(
                f"policy_model/engine-0 exited (its Ray actor ng-{run_id}-policy_model-engine-0 on node "
                f"{engines[0]['node_id']} ({engines[0]['node']}) died (the process died with it)); restarting it in 1 s"
            ),
        )
        assert figures["failovers"] > 0
        log = stack.log()
        assert f"removed 5 actors and 2 placement groups of run {run_id}" in log
