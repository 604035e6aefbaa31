"""local_vllm_model on one GPU, through ng_run and the shipped configs (nothing started by hand).

- the quick start's stack with its engine on the GPU: rollouts scored;
- two engines of one local_vllm_model sharing the GPU (replicas_per_device: 2): load spread over
  both, one SIGKILLed mid-run without losing a rollout, restarted, serving again;
- the Gemma-3 quirk: `load_format: dummy` asked, `auto` loaded, with the warning.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ng_cli.toolchain.local_vllm import TINY_MODEL_SCRIPT, default_engine_python
from tests.fixtures.engine_stack import EXAMPLE_ENV_CONFIG, engine_stack, kill_one_engine_mid_run

CONFIGS = "responses_api_models/local_vllm_model/configs"


def _record(name: str, figures: dict[str, Any]) -> None:
    folder = os.environ.get("NG_GPU_RESULTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.json").write_text(json.dumps(figures, indent=2))


def test_quickstart_stack_scores_rollouts_on_the_gpu(tmp_path: Path) -> None:
    with engine_stack(tmp_path, [EXAMPLE_ENV_CONFIG, f"{CONFIGS}/gpu_tiny_weather.yaml"]) as stack:
        (engine,) = stack.engines
        assert engine["devices"] == "0"
        collector = stack.collect("rollouts", 8)
        out, _ = collector.communicate(timeout=600)
        assert collector.returncode == 0, out[-3000:]
        rows = stack.rows("rollouts")
        rewards = [float(row["reward"]) for row in rows]
        assert len(rows) == 40
        assert sum(rewards) / len(rewards) >= 0.8
        _record(
            "quickstart_stack",
            {"engine": engine, "engine_ready_s": stack.process.ready["ready_s"].get(engine["name"]),
             "rollouts": len(rows), "mean_reward": sum(rewards) / len(rewards)},
        )  # fmt: skip


def test_two_replicas_share_the_gpu_and_one_killed_loses_nothing(tmp_path: Path) -> None:
    with engine_stack(tmp_path, [EXAMPLE_ENV_CONFIG, f"{CONFIGS}/gpu_two_replicas.yaml"]) as stack:
        assert [engine["devices"] for engine in stack.engines] == ["0", "0"]
        figures = kill_one_engine_mid_run(stack, first_repeats=40, second_repeats=8)
        _record("two_replicas_kill", figures)


def test_gemma3_asked_for_dummy_weights_loads_real_ones(tmp_path: Path) -> None:
    model = Path("/tmp/ng-models/tiny-gemma3")  # where the shipped config looks
    python = default_engine_python()
    subprocess.run(
        [python, str(TINY_MODEL_SCRIPT), "--arch", "gemma3", "--out", str(model)], check=True, timeout=300
    )
    with engine_stack(tmp_path, [f"{CONFIGS}/gpu_gemma3_quirk.yaml"]) as stack:
        log = stack.log()
    assert (
        "warning: policy_model: load_format: dummy overridden with auto for model_type 'gemma3_text'" in log
    )
    assert "'load_format': 'auto'" in log or "load_format=auto" in log
    _record("gemma3_quirk", {"warning_shown": True, "loaded": "auto"})
