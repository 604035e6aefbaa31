"""vllm_model / openai_model config: required keys named, URLs checked (a missing /v1 warned of,
with the corrected URL), placeholders told apart from wrong values, no leaks."""

from __future__ import annotations

from typing import Any

import pytest

from ng_cli.config.schema import validate_block
from ng_cli.errors import ConfigError, IncompleteConfigError
from ng_cli.upstream.config import OpenAIModelConfig, VllmModelConfig, root_url_of

REQUIRED = ("base_url", "api_key", "model", "return_token_id_information", "uses_reasoning_parser")


def vllm_block(**overrides: Any) -> dict[str, Any]:
    block: dict[str, Any] = {
        "entrypoint": "app.py",
        "base_url": "http://localhost:8000/v1",
        "api_key": "token-abc123",
        "model": "Qwen/Qwen3-0.6B",
        "return_token_id_information": False,
        "uses_reasoning_parser": False,
    }
    block.update(overrides)
    return block


def test_seed_quick_start_block_is_valid_with_seed_defaults() -> None:
    config = validate_block(VllmModelConfig, block=vllm_block())
    assert config.base_urls == ["http://localhost:8000/v1"]
    assert config.api_key.get_secret_value() == "token-abc123"
    assert config.replace_developer_role_with_system is False
    assert config.chat_template_kwargs is None
    assert config.extra_body is None


@pytest.mark.parametrize("key", REQUIRED)
def test_each_required_key_is_named_when_missing(key: str) -> None:
    block = vllm_block()
    del block[key]
    with pytest.raises(ConfigError) as caught:
        validate_block(VllmModelConfig, block=block)
    assert f"missing required key '{key}'" in caught.value.message


def test_base_url_without_v1_is_used_as_written_with_a_warning_showing_the_corrected_url() -> None:
    """NeMo Gym 0.7.0 posts to `<base_url>/chat/completions` whatever the path (a proxy may have
    its own); so do we, and say where vLLM itself serves it."""
    config = validate_block(VllmModelConfig, block=vllm_block(base_url="http://localhost:10240"))
    assert config.base_urls == ["http://localhost:10240"]
    (warning,) = config.config_warnings
    assert warning.startswith("base_url: 'http://localhost:10240' does not end with /v1")
    assert "http://localhost:10240/v1/chat/completions" in warning
    assert validate_block(VllmModelConfig, block=vllm_block()).config_warnings == ()


def test_a_url_password_is_masked_in_the_v1_warning() -> None:
    config = validate_block(VllmModelConfig, block=vllm_block(base_url="http://u:pw-1234567890@proxy:8000"))
    (warning,) = config.config_warnings
    assert "'http://u:***@proxy:8000'" in warning
    assert "pw-1234567890" not in warning


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("base_url", "http://<host_url>:<port>/v1", "is still a placeholder ('http://<host_url>:<port>/v1')"),
        ("base_url", "MISSING", "is still a placeholder ('MISSING')"),
        ("base_url", None, "is not set (null)"),
        ("api_key", None, "is not set (null)"),
        ("api_key", "<api_key>", "is still a placeholder ('<api_key>')"),
        ("model", "<model>", "is still a placeholder ('<model>')"),
    ],
)
def test_a_placeholder_is_incomplete_not_wrong_and_shown_as_written(key: str, value: Any, shown: str) -> None:
    """NeMo Gym's jailbreak_detection/configs/safety_judge_model.yaml (`http://<host_url>:<port>/v1`)
    and `${oc.env:NVIDIA_API_KEY,null}`: the server cannot start until they are set, and the
    message says so (it said "the port must be a number", and `got '***'` for a null key)."""
    with pytest.raises(IncompleteConfigError) as caught:
        validate_block(VllmModelConfig, block=vllm_block(**{key: value}), instance="judge")
    assert caught.value.message == f"judge.{key} {shown}; the server 'judge' cannot start until it is set"
    assert "'***'" not in caught.value.message


def test_a_wrong_value_beside_a_placeholder_is_a_plain_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_block(VllmModelConfig, block=vllm_block(api_key=None, base_url="localhost:8000/v1"))
    assert not isinstance(caught.value, IncompleteConfigError)
    assert "api_key is not set (null)" in caught.value.message


def test_an_unknown_key_set_to_null_is_unknown_not_a_placeholder() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_block(VllmModelConfig, block=vllm_block(prompt_config=None))
    assert not isinstance(caught.value, IncompleteConfigError)
    assert "unknown key 'prompt_config'" in caught.value.message


def test_base_url_pointing_at_a_route_suggests_the_api_root() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_block(
            VllmModelConfig,
            block=vllm_block(base_url=["http://a:8000/v1", "http://b:8000/v1/chat/completions"]),
        )
    assert "'http://b:8000/v1'" in caught.value.message


def test_list_of_base_urls_is_normalised() -> None:
    config = validate_block(
        VllmModelConfig, block=vllm_block(base_url=["http://a:8000/v1/", "http://b:8000/v1"])
    )
    assert config.base_urls == ["http://a:8000/v1", "http://b:8000/v1"]


@pytest.mark.parametrize(
    ("base_url", "fragment"),
    [
        ([], "empty list"),
        ("localhost:8000/v1", "http(s) URL"),
        (["http://a:8000/v1", "http://a:8000/v1/"], "more than once"),
        (["http://a:8000/v1", "http://A:8000/v1"], "more than once"),  # host names ignore case
        (["http://a:80/v1", "http://a/v1"], "more than once"),  # the scheme's default port
        (["https://a/v1", "https://a:443/v1"], "more than once"),
        ("http://a:99999/v1", "port"),
    ],
)
def test_bad_base_urls_are_explained(base_url: Any, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_block(VllmModelConfig, block=vllm_block(base_url=base_url))
    assert fragment in caught.value.message


@pytest.mark.parametrize(
    ("base_url", "fragment"),
    [
        ("http://u:pw-1234567890@proxy:8000/v1/chat/completions", "'http://u:***@proxy:8000/v1'"),
        ("http://u:pw-1234567890@<host>:8000/v1", "'http://u:***@<host>:8000/v1'"),
        ("http://u:pw-1234567890@proxy:8000/v1?x=1", "query or fragment"),
        (["http://u:pw-1234567890@a/v1", "http://a/v1"], "more than once"),
    ],
)
def test_a_url_password_is_masked_in_base_url_errors(base_url: Any, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_block(VllmModelConfig, block=vllm_block(base_url=base_url))
    assert fragment in caught.value.message
    assert "pw-1234567890" not in str(caught.value) + str(caught.value.hint)


def test_unknown_key_is_rejected_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_block(VllmModelConfig, block=vllm_block(uses_reasoning_parsr=True))
    assert "uses_reasoning_parser" in caught.value.message


def test_api_key_never_appears_in_repr_or_errors() -> None:
    config = validate_block(VllmModelConfig, block=vllm_block(api_key="sk-very-secret"))
    assert "sk-very-secret" not in repr(config)
    with pytest.raises(ConfigError) as caught:
        validate_block(VllmModelConfig, block=vllm_block(api_key="sk-very-secret", read_timeout_s=-1))
    assert "sk-very-secret" not in str(caught.value) + str(caught.value.hint)


def test_timeouts_and_retry_policy_come_from_the_config() -> None:
    config = validate_block(
        VllmModelConfig,
        block=vllm_block(
            connect_timeout_s=1, read_timeout_s=2, total_timeout_s=3, max_attempts=5, backoff_s=0.5
        ),
    )
    assert (config.timeouts().connect_s, config.timeouts().read_s, config.timeouts().total_s) == (1, 2, 3)
    assert config.retry_policy().max_attempts == 5
    assert config.retry_policy().backoff_s == 0.5


def test_total_timeout_shorter_than_connect_is_rejected() -> None:
    with pytest.raises(ConfigError, match="total_timeout_s"):
        validate_block(VllmModelConfig, block=vllm_block(connect_timeout_s=10, total_timeout_s=5))


def test_openai_model_accepts_any_api_root() -> None:
    block = {"base_url": "https://api.example.com/openai", "api_key": "k", "model": "gpt-x"}
    config = validate_block(OpenAIModelConfig, block=block)
    assert config.base_urls == ["https://api.example.com/openai"]
    assert config.check_model_at_startup is True


@pytest.mark.parametrize(
    ("base_url", "root"),
    [
        ("http://h:8000/v1", "http://h:8000"),
        ("http://h:8000/v1/", "http://h:8000"),
        ("http://h/x/v1", "http://h/x"),
    ],
)
def test_root_url_drops_the_v1_path(base_url: str, root: str) -> None:
    assert root_url_of(base_url) == root


def test_nemo_gym_keys_take_nemo_gyms_values_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """NeMo Gym 0.7.0's VLLMModelConfig: `reasoning_field` defaults to `$NEMO_GYM_REASONING_FIELD`,
    `endpoint_stale_grace_s` takes 0, `supply_prefix_token_ids` needs token ids (its validator)."""
    monkeypatch.setenv("NEMO_GYM_REASONING_FIELD", "reasoning")
    assert validate_block(VllmModelConfig, block=vllm_block()).reasoning_field == "reasoning"
    assert validate_block(VllmModelConfig, block=vllm_block(reasoning_field="both")).reasoning_field == "both"
    monkeypatch.setenv("NEMO_GYM_REASONING_FIELD", "neither")
    with pytest.raises(ConfigError, match="reasoning_field: Input should be 'both'"):
        validate_block(VllmModelConfig, block=vllm_block())
    monkeypatch.delenv("NEMO_GYM_REASONING_FIELD")
    assert (
        validate_block(VllmModelConfig, block=vllm_block(endpoint_stale_grace_s=0)).endpoint_stale_grace_s
        == 0
    )
    with pytest.raises(
        ConfigError, match="supply_prefix_token_ids requires return_token_id_information=true"
    ):
        validate_block(VllmModelConfig, block=vllm_block(supply_prefix_token_ids=True))
    config = validate_block(
        VllmModelConfig, block=vllm_block(supply_prefix_token_ids=True, return_token_id_information=True)
    )
    assert any(
        "supply_prefix_token_ids: true changes nothing here" in line for line in config.config_warnings
    )


def test_token_exact_does_not_run_with_a_continued_final_message() -> None:
    """token_exact's prompt ends with the template's generation prompt: it cannot continue a message."""
    with pytest.raises(ConfigError, match="cannot run with continue_final_assistant_message"):
        validate_block(
            VllmModelConfig,
            block=vllm_block(
                token_exact=True, return_token_id_information=True, continue_final_assistant_message=True
            ),
        )


def test_attempts_have_no_upper_bound_as_nemo_gyms_max_http_attempts() -> None:
    """NeMo Gym's gdpval judges set `max_http_attempts: 1800` (a rate-limited judge); 0 is still refused."""
    config = validate_block(VllmModelConfig, block=vllm_block(max_attempts=1800))
    assert config.retry_policy().max_attempts == 1800
    with pytest.raises(ConfigError, match="max_attempts"):
        validate_block(VllmModelConfig, block=vllm_block(max_attempts=0))
