"""`gpu_ids`: an instance's engines on GPUs named by their machine-wide ids (a trainer holds another)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ng_cli.config.compose import ComposedConfig, compose_config
from ng_cli.errors import ConfigError
from ng_cli.launcher.plan import engine_plans

ROOT = Path(__file__).resolve().parents[3]
BLOCK = """\
{name}:
  responses_api_models:
    local_vllm_model:
      entrypoint: app.py
      model: {model}
      return_token_id_information: false
      uses_reasoning_parser: false
{extra}"""


def compose(tmp_path: Path, *blocks: tuple[str, str]) -> ComposedConfig:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    config = tmp_path / "stack.yaml"
    config.write_text("".join(BLOCK.format(name=name, model=model, extra=extra) for name, extra in blocks))
    return compose_config([f"+config_paths=[{config}]"], cwd=ROOT)


def devices_by_instance(
    tmp_path: Path, env: dict[str, str], *blocks: tuple[str, str]
) -> dict[str, list[str]]:
    plans = engine_plans(compose(tmp_path, *blocks), env=env, python="/opt/vllm/bin/python")
    return {plan.instance: [",".join(engine.devices) for engine in plan.engines] for plan in plans}


def test_gpu_ids_place_the_engine_beside_a_trainer_that_sees_only_gpu_0(tmp_path: Path) -> None:
    planned = devices_by_instance(tmp_path, {"CUDA_VISIBLE_DEVICES": "0"}, ("policy", "      gpu_ids: [1]\n"))
    assert planned == {"policy": ["1"]}


def test_without_gpu_ids_instances_take_the_visible_gpus_in_order(tmp_path: Path) -> None:
    planned = devices_by_instance(
        tmp_path,
        {"CUDA_VISIBLE_DEVICES": "0,1,2"},
        ("judge", "      gpu_ids: [0]\n"),
        ("policy", "      vllm_serve_kwargs: {tensor_parallel_size: 2}\n"),
    )
    assert planned == {"judge": ["0"], "policy": ["1,2"]}


def test_a_gpu_another_instance_took_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        devices_by_instance(
            tmp_path,
            {"CUDA_VISIBLE_DEVICES": "0,1"},
            ("judge", ""),
            ("policy", "      gpu_ids: [0]\n"),
        )
    assert "stack.yaml:" in caught.value.message
    assert "policy.gpu_ids" in caught.value.message
    assert "takes GPU 0" in caught.value.message


@pytest.mark.parametrize("bad", ["[]", "[1, 1]", "[-1]"])
def test_bad_gpu_ids_are_config_errors(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match="gpu_ids"):
        devices_by_instance(tmp_path, {}, ("policy", f"      gpu_ids: {bad}\n"))


def test_gpu_ids_are_refused_with_a_ray_placement(tmp_path: Path) -> None:
    config = compose(tmp_path, ("policy", "      gpu_ids: [1]\n"))
    with pytest.raises(ConfigError, match="ray"):
        engine_plans(config, env={}, python="/opt/vllm/bin/python", on_cluster=True)


def test_the_trl_recipe_in_the_training_docs_plans_its_engine_beside_the_trainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (ROOT / "docs" / "training.md").read_text()
    recipe = next(block for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL) if "gpu_ids" in block)
    config = tmp_path / "engine.yaml"
    config.write_text(recipe)
    model = tmp_path / "step-0"
    model.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):  # token_exact reads the tokenizer
        shutil.copy(ROOT / "models" / "tiny-weather" / name, model / name)
    monkeypatch.setenv("NG_TRL_KEY", "a-key")
    composed = compose_config(
        [f"+config_paths=[{config}]", f"++policy_model.responses_api_models.local_vllm_model.model={model}"],
        cwd=ROOT,
    )

    (plan,) = engine_plans(composed, env={"CUDA_VISIBLE_DEVICES": "0"}, python="/opt/vllm/bin/python")

    assert [engine.devices for engine in plan.engines] == [("1",)]
    assert plan.api_key == "a-key"
    assert plan.weight_updates
