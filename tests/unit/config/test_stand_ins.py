"""Stand-ins for a policy model left to other files (NeMo Gym's NO_MODEL values), for commands
that never call it: unset or `???` policy values, and a missing `policy_model` instance."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.config.stand_ins import POLICY_MODEL, STAND_INS, compose_with_stand_ins, stand_in_warning
from ng_cli.errors import ConfigError

ENVIRONMENT = """\
env_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: env}
      model_server: {type: responses_api_models, name: policy_model}
env:
  resources_servers:
    example_single_tool_call:
      entrypoint: app.py
"""


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "env.yaml").write_text("{}\n")
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "env.yaml"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_missing_policy_model_instance_is_stood_in(in_tmp: Path) -> None:
    (in_tmp / "environment.yaml").write_text(ENVIRONMENT)
    stood = compose_with_stand_ins(["+config_paths=[environment.yaml]"])
    assert stood.keys == [POLICY_MODEL]
    assert stood.error is not None
    assert "instance named 'policy_model'" in stood.error.message
    model = stood.composed.instances[POLICY_MODEL]
    assert (model.implementation, model.block["base_url"]) == ("vllm_model", STAND_INS["policy_base_url"])
    assert "no 'policy_model' instance" in stand_in_warning(stood.keys, strict_hint=True)


def test_policy_values_set_to_missing_are_stood_in_then_the_instance(in_tmp: Path) -> None:
    (in_tmp / "values.yaml").write_text("policy_base_url: ???\npolicy_model_name: ???\n")
    (in_tmp / "environment.yaml").write_text(ENVIRONMENT)
    (in_tmp / "model.yaml").write_text(
        "judge:\n  responses_api_models:\n    vllm_model:\n      entrypoint: app.py\n"
        "      base_url: ${policy_base_url}\n      api_key: k\n      model: ${policy_model_name}\n"
        "      return_token_id_information: false\n      uses_reasoning_parser: false\n"
    )
    stood = compose_with_stand_ins(["+config_paths=[values.yaml,environment.yaml,model.yaml]"])
    assert stood.keys == ["policy_base_url", "policy_model_name", POLICY_MODEL]
    assert stood.composed.instances["judge"].block["base_url"] == STAND_INS["policy_base_url"]


def test_other_problems_are_not_stood_in(in_tmp: Path) -> None:
    (in_tmp / "environment.yaml").write_text(ENVIRONMENT.replace("name: policy_model", "name: judge_model"))
    with pytest.raises(ConfigError, match="instance named 'judge_model'"):
        compose_with_stand_ins(["+config_paths=[environment.yaml]"])
