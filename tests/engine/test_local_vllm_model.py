"""local_vllm_model on the real CPU engine: ng_run starts two engines from config, a SIGKILLed one
fails over, restarts and rejoins, no request of the run fails, and SIGINT leaves nothing behind.

The stack is the quick start's (example_single_tool_call + the shipped tiny_weather_cpu.yaml) with
`data_parallel_size: 2`: two independent engines of models/tiny-weather, balanced by the model
server's pool. The engine is the subject here, so everything is real: vLLM, ng_run, the servers,
the collector. tests/gpu/ runs the same scenario on a GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.engine_stack import ENGINE_KEY, EXAMPLE_ENV_CONFIG, engine_stack, kill_one_engine_mid_run

CPU_CONFIG = "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml"


@pytest.mark.usefixtures("vllm_env")
def test_two_engines_one_killed_mid_run_nothing_lost_and_it_rejoins(tmp_path: Path) -> None:
    overrides = [
        f"++{ENGINE_KEY}.vllm_serve_kwargs.data_parallel_size=2",
        f"++{ENGINE_KEY}.max_restarts=2",
        f"++{ENGINE_KEY}.health_probe_interval_s=1",
    ]
    with engine_stack(tmp_path, [EXAMPLE_ENV_CONFIG, CPU_CONFIG], overrides) as stack:
        assert all(engine["devices"] == "cpu" for engine in stack.engines)
        kill_one_engine_mid_run(stack)
