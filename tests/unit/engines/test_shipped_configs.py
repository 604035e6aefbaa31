"""Every shipped local_vllm_model config plans (as ng_run +dry_run=true would) with the models it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ng_cli.config.compose import compose_config
from ng_cli.launcher.plan import engine_plans

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = sorted((ROOT / "responses_api_models" / "local_vllm_model" / "configs").glob("*.yaml"))
KEY = "policy_model.responses_api_models.local_vllm_model"
# config -> (model_type, experts, expected engines as (devices, EP)), on two visible GPUs
EXPECTED = {
    "tiny_weather_cpu.yaml": ("qwen2", 0, [((), 1)]),
    "gpu_tiny_weather.yaml": ("qwen2", 0, [(("0",), 1)]),
    "gpu_two_replicas.yaml": ("qwen2", 0, [(("0",), 1), (("0",), 1)]),
    "gpu_dense_8b_weights.yaml": ("llama", 0, [(("0",), 1)]),
    "gpu_dense_8b_push_ipc.yaml": ("llama", 0, [(("0",), 1)]),
    "gpu_dense_8b_push_nccl.yaml": ("llama", 0, [(("0",), 1)]),
    "gpu_dense_8b_dummy.yaml": ("llama", 0, [(("0",), 1)]),
    "gpu_gemma3_quirk.yaml": ("gemma3_text", 0, [(("0",), 1)]),
    "moe_dp2_ep2.yaml": ("qwen3_moe", 16, [(("0", "1"), 2)]),
}


def test_every_shipped_config_is_covered() -> None:
    assert {path.name for path in CONFIGS} == set(EXPECTED)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.name)
def test_shipped_config_plans(path: Path, tmp_path: Path) -> None:
    model_type, experts, expected = EXPECTED[path.name]
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": model_type, "num_local_experts": experts}))
    config = compose_config([f"+config_paths=[{path}]", f"++{KEY}.model={model}"], cwd=ROOT)
    env = {} if path.name.endswith("_cpu.yaml") else {"CUDA_VISIBLE_DEVICES": "0,1"}

    (plan,) = engine_plans(config, env=env, python="/opt/vllm/bin/python")

    assert [(engine.devices, engine.expert_parallel_size) for engine in plan.engines] == expected
