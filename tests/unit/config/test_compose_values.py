"""`compose_config(values=...)`: a program's config dict (NeMo Gym's `initial_global_config_dict`)
sits above the files and env.yaml and below the command line, and names `config_paths` itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.config.compose import VALUES_ORIGIN, compose_config
from ng_cli.errors import ConfigError

CONF = """\
policy_model:
  responses_api_models:
    vllm_model:
      entrypoint: app.py
      base_url: ${policy_base_url}
      api_key: ${policy_api_key}
      model: ${policy_model_name}
"""


@pytest.fixture
def files(repo: Path, cwd: Path) -> Path:  # noqa: ARG001 (repo: the fake repo root is set first)
    (cwd / "conf.yaml").write_text(CONF)
    (cwd / "env.yaml").write_text(
        "policy_base_url: http://from-env-yaml/v1\npolicy_api_key: env-key\npolicy_model_name: m\n"
    )
    return cwd


def test_values_win_over_env_yaml_and_name_the_config_files(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NG_ENV_YAML")
    values = {"config_paths": ["conf.yaml"], "policy_base_url": "http://trainer:8000/v1"}

    composed = compose_config([], cwd=files, values=values)

    block = composed.tree["policy_model"]["responses_api_models"]["vllm_model"]
    assert block["base_url"] == "http://trainer:8000/v1"
    assert block["api_key"] == "env-key"  # what the values leave out still comes from env.yaml
    assert composed.sources.lookup("policy_base_url") == VALUES_ORIGIN
    assert list(composed.instances) == ["policy_model"]


def test_the_command_line_wins_over_values_and_env_yaml_can_be_left_out(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NG_ENV_YAML")
    values = {"config_paths": ["conf.yaml"], "policy_base_url": "http://trainer/v1", "policy_api_key": "k"}

    composed = compose_config(["++policy_base_url=http://cli/v1"], cwd=files, values=values)
    assert composed.tree["policy_base_url"] == "http://cli/v1"

    with pytest.raises(ConfigError, match="policy_model_name"):  # env.yaml's model name is not read
        compose_config([], cwd=files, values=values, read_env_yaml=False)


def test_config_paths_of_the_wrong_type_names_the_values(files: Path) -> None:
    with pytest.raises(ConfigError, match=r"<initial_global_config_dict>  config_paths: expected a list"):
        compose_config([], cwd=files, values={"config_paths": {"a": 1}})


def test_the_policy_values_are_free_keys_even_where_no_config_reads_them(files: Path) -> None:
    (files / "plain.yaml").write_text("env:\n  resources_servers:\n    echo_env:\n      entrypoint: app.py\n")
    values = {"config_paths": ["plain.yaml"], "policy_base_url": "http://t/v1", "policy_api_key": "EMPTY"}
    values |= {"policy_model_name": "m", "num_sampels": 3}

    composed = compose_config([], cwd=files, values=values)

    assert {"policy_base_url", "policy_api_key", "policy_model_name"} <= composed.free_keys
    assert "num_sampels" not in composed.free_keys  # a typo stays an unknown option
