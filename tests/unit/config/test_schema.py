"""Config models and validate_block's messages (file:line, dotted key, instance, masked values)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from ng_cli.config.compose import compose_config
from ng_cli.config.instances import ServerInstance
from ng_cli.config.schema import (
    AgentServerConfig,
    DatasetConfig,
    ModelServerConfig,
    ResourcesServerConfig,
    ServerConfig,
    ServerRef,
    validate_block,
)
from ng_cli.errors import ConfigError, IncompleteConfigError


class _VllmLike(ModelServerConfig):
    api_key: str
    base_url: str
    max_tokens: int = 16


def _instance(block: dict[str, object]) -> ServerInstance:
    return ServerInstance("policy_model", "responses_api_models", "vllm_model", block, "conf/model.yaml:2")


def test_defaults_and_frozen() -> None:
    config = ServerConfig()
    assert (config.entrypoint, config.host, config.port) == ("app.py", "127.0.0.1", None)
    with pytest.raises(ValidationError):
        config.port = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "model", [ServerConfig, ResourcesServerConfig, DatasetConfig, AgentServerConfig, ServerRef]
)
def test_every_field_is_documented(model: type[ServerConfig]) -> None:
    undocumented = [name for name, field in model.model_fields.items() if not field.description]
    assert undocumented == []


def test_missing_required_key_names_key_instance_and_file() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_block(_VllmLike, _instance({"entrypoint": "app.py", "base_url": "http://h/v1"}))
    assert str(caught.value) == (
        "conf/model.yaml:2  policy_model.responses_api_models.vllm_model.api_key: missing required key "
        "'api_key' in instance 'policy_model' (responses_api_models/vllm_model)"
    )
    assert "++policy_model.responses_api_models.vllm_model.api_key=..." in (caught.value.hint or "")


@pytest.mark.usefixtures("repo")
def test_all_problems_in_one_error_with_exact_lines(cwd: Path) -> None:
    config = compose_config(
        ["+config_paths=[conf/model.yaml]", "+policy_model.responses_api_models.vllm_model.prot=1"], cwd=cwd
    )
    instance = config.instances["policy_model"]
    with pytest.raises(ConfigError) as caught:
        validate_block(_VllmLike, instance, {**instance.block, "max_tokens": "many"}, sources=config.sources)
    lines = str(caught.value).splitlines()
    assert lines[0] == "4 problems in instance 'policy_model' (responses_api_models/vllm_model):"
    key = "policy_model.responses_api_models.vllm_model"
    assert f"  conf/model.yaml:10  {key}.max_tokens: Input should be a valid integer" in lines[1]
    assert "got 'many'" in lines[1]
    assert any(
        f"<command line>  {key}.prot: unknown key 'prot'" in line and "did you mean 'port'?" in line
        for line in lines
    )


def test_bad_values_of_secret_keys_are_masked() -> None:
    block = {"api_key": 12345678, "base_url": "u", "max_tokens": 1}
    with pytest.raises(ConfigError) as caught:
        validate_block(_VllmLike, _instance(block))
    assert "12345678" not in str(caught.value)
    assert "got '***'" in str(caught.value)


def test_child_call_form_with_only_an_instance_name() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_block(_VllmLike, {"base_url": "u"}, instance="policy_model", source="spec.json")
    assert str(caught.value) == (
        "spec.json  policy_model.api_key: missing required key 'api_key' in instance 'policy_model'"
    )
    assert caught.value.hint == "add api_key to the block in the config file (spec.json)"
    assert isinstance(caught.value, IncompleteConfigError)  # a block to complete, not a wrong one
    config = validate_block(_VllmLike, {"api_key": "k", "base_url": "u"}, instance="policy_model")
    assert config.api_key == "k"


def test_block_without_instance() -> None:
    with pytest.raises(ConfigError, match=r"^port: Input should be greater than or equal to 1, got 0$"):
        validate_block(ServerConfig, {"port": 0})


def test_agent_references_must_point_at_the_right_type() -> None:
    block = {
        "resources_server": {"type": "responses_api_models", "name": "x"},
        "model_server": {"type": "responses_api_models", "name": "y"},
    }
    with pytest.raises(ConfigError, match="resources_server must refer to resources_servers"):
        validate_block(AgentServerConfig, block)


def test_agent_with_datasets() -> None:
    block = {
        "resources_server": {"type": "resources_servers", "name": "r"},
        "model_server": {"type": "responses_api_models", "name": "m"},
        "datasets": [{"name": "ex", "type": "example", "jsonl_fpath": "d.jsonl"}],
    }
    agent = validate_block(AgentServerConfig, block)
    assert agent.datasets[0].num_repeats == 1
    with pytest.raises(
        ConfigError,
        match=r"datasets\.0\.type: Input should be 'train', 'validation', 'example' or 'benchmark'",
    ):
        validate_block(
            AgentServerConfig, {**block, "datasets": [{"name": "ex", "type": "test", "jsonl_fpath": "d"}]}
        )


def test_domain_is_checked() -> None:
    assert validate_block(ResourcesServerConfig, {"domain": "e2e"}).domain == "e2e"
    with pytest.raises(ConfigError, match="domain: Input should be"):
        validate_block(ResourcesServerConfig, {"domain": "maths"})


def test_nemo_gym_catalogue_keys_are_accepted_on_resources_servers() -> None:
    block = {
        "entrypoint": "app.py",
        "domain": "math",
        "description": "Math with a judge",
        "verified": True,
        "value": "Improve math reasoning",
    }
    config = validate_block(ResourcesServerConfig, block, instance="math")
    assert (config.description, config.verified, config.value) == (
        "Math with a judge",
        True,
        "Improve math reasoning",
    )
    with pytest.raises(ConfigError, match="verifed"):
        validate_block(ResourcesServerConfig, {**block, "verifed": True}, instance="math")


# -- NeMo Gym keys -------------------------------------------------------------------------------


def test_nemo_gym_key_at_its_default_is_one_warning_and_otherwise_refused() -> None:
    from ng_cli.upstream.config import VllmModelConfig

    block = {
        "base_url": "http://h:8000/v1",
        "api_key": "k",
        "model": "m",
        "return_token_id_information": False,
        "uses_reasoning_parser": True,
        "use_completions_api": False,
    }
    config = validate_block(VllmModelConfig, block, instance="policy")
    assert len(config.config_warnings) == 1
    assert "'use_completions_api' changes nothing here" in config.config_warnings[0]
    with pytest.raises(ConfigError) as caught:
        validate_block(VllmModelConfig, {**block, "use_completions_api": True}, instance="policy")
    assert "policy.use_completions_api: NeMo Gym's 'use_completions_api' set to True is not supported" in (
        caught.value.message
    )


def test_openai_model_accepts_nemo_gym_names() -> None:
    from ng_cli.upstream.config import OpenAIModelConfig

    config = validate_block(
        OpenAIModelConfig,
        {
            "openai_base_url": "http://h/v1",
            "openai_api_key": "k",
            "openai_model": "m",
            "openai_default_headers": {"X-A": "1"},
            "max_http_attempts": 5,
        },
        instance="o",
    )
    assert (config.base_url, config.model, config.default_headers, config.max_attempts) == (
        "http://h/v1",
        "m",
        {"X-A": "1"},
        5,
    )
    assert config.config_warnings == ()
