"""Non-finite numbers (`inf`, `nan`) are refused in every command's options, naming the key.

`+rollout_timeout_s=inf` used to fail every rollout as `internal` and `+pass_threshold=nan`
made every comparison false; Hydra's grammar reads `inf`, `nan` and `1e999` as floats.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ng_cli.commands.update_weights import UpdateWeightsOptions
from ng_cli.config.command_options import command_options
from ng_cli.config.compose import ComposedConfig, compose_config
from ng_cli.config.schema import validate_block
from ng_cli.errors import ConfigError
from ng_cli.launcher.plan import read_seconds
from ng_cli.launcher.ray.config import read_ray_config
from ng_cli.report.config import report_config_from
from ng_cli.rollouts.config import collect_config_from
from ng_cli.rollouts.profile_options import RewardProfileOptions
from ng_cli.upstream.config import VllmModelConfig

COLLECT = ["+input_jsonl_fpath=in.jsonl", "+output_jsonl_fpath=out.jsonl"]
PROFILE = ["+input_jsonl_fpath=in.jsonl", "+rollouts_jsonl_fpath=r.jsonl", "+output_jsonl_fpath=p.jsonl"]


def update_weights_options(composed: ComposedConfig) -> UpdateWeightsOptions:
    return command_options(composed, UpdateWeightsOptions, command="ng_update_weights")


def profile_config_from(composed: ComposedConfig) -> RewardProfileOptions:
    return command_options(composed, RewardProfileOptions, command="ng_reward_profile")


pytestmark = pytest.mark.usefixtures("empty_env_yaml")


@pytest.mark.parametrize(
    ("read", "overrides", "key", "shown"),
    [
        (collect_config_from, [*COLLECT, "+rollout_timeout_s=inf"], "rollout_timeout_s", "inf"),
        (collect_config_from, [*COLLECT, "+pass_threshold=nan"], "pass_threshold", "nan"),
        (collect_config_from, [*COLLECT, "+retry_backoff_s=-inf"], "retry_backoff_s", "-inf"),
        (collect_config_from, [*COLLECT, "+progress_interval_s=1e999"], "progress_interval_s", "inf"),
        (
            collect_config_from,
            [*COLLECT, "+responses_create_params={temperature: nan}"],
            "responses_create_params.temperature",
            "nan",
        ),
        (report_config_from, ["+input_jsonl_fpath=r.jsonl", "+pass_threshold=nan"], "pass_threshold", "nan"),
        (profile_config_from, [*PROFILE, "+pass_threshold=inf"], "pass_threshold", "inf"),
        (profile_config_from, [*PROFILE, "+keep_pass_rate=[0,nan]"], "keep_pass_rate.1", "nan"),
        (update_weights_options, ["+path=/ckpt", "+version=2", "+timeout_s=inf"], "timeout_s", "inf"),
    ],
    ids=[
        "collect-timeout-inf",
        "collect-threshold-nan",
        "collect-backoff-minus-inf",
        "collect-overflow",
        "collect-nested",
        "report",
        "profile",
        "profile-list",
        "update-weights",
    ],
)
def test_a_non_finite_option_is_refused_naming_it(
    tmp_path: Path, read: Callable[[ComposedConfig], Any], overrides: list[str], key: str, shown: str
) -> None:
    composed = compose_config(overrides, cwd=tmp_path)
    with pytest.raises(ConfigError) as caught:
        read(composed)
    assert f"<command line>  {key}: expected a finite number, got {shown}" in caught.value.message
    assert caught.value.exit_code == 2


def test_finite_options_still_pass(tmp_path: Path) -> None:
    composed = compose_config(
        [
            *COLLECT,
            "+rollout_timeout_s=1e3",
            "+pass_threshold=0.5",
            "+responses_create_params={temperature: 0.7}",
        ],
        cwd=tmp_path,
    )
    config = collect_config_from(composed)
    assert (config.rollout_timeout_s, config.pass_threshold) == (1000.0, 0.5)


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_ng_run_durations_must_be_finite(tmp_path: Path, value: str) -> None:
    composed = compose_config([f"+ready_timeout_s={value}"], cwd=tmp_path)
    with pytest.raises(
        ConfigError, match=rf"ready_timeout_s: expected a positive number of seconds, got {value}"
    ):
        read_seconds(composed, "ready_timeout_s", 30.0)


def test_the_ray_block_refuses_non_finite_numbers(tmp_path: Path) -> None:
    composed = compose_config(["++ray.address=local", "++ray.placement_timeout_s=inf"], cwd=tmp_path)
    with pytest.raises(ConfigError, match=r"ray\.placement_timeout_s: .*finite number"):
        read_ray_config(composed, [])


def test_a_server_block_refuses_non_finite_numbers() -> None:
    block = {
        "entrypoint": "app.py",
        "base_url": "http://localhost:8000/v1",
        "api_key": "k",
        "model": "m",
        "return_token_id_information": False,
        "uses_reasoning_parser": False,
        "read_timeout_s": float("inf"),
    }
    with pytest.raises(ConfigError, match=r"read_timeout_s: .*finite number"):
        validate_block(VllmModelConfig, block, instance="policy_model")
