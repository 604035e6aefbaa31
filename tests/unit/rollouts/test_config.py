"""The collector's options come from the composed config; bad values name their key."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.config.compose import compose_config
from ng_cli.errors import ConfigError
from ng_cli.rollouts.config import DEFAULT_HEAD_SERVER_URL, CollectConfig, collect_config_from

REQUIRED = ["+input_jsonl_fpath=in.jsonl", "+output_jsonl_fpath=out.jsonl"]


pytestmark = pytest.mark.usefixtures("empty_env_yaml")


def config_of(overrides: list[str], tmp_path: Path) -> CollectConfig:
    return collect_config_from(compose_config([*REQUIRED, *overrides], cwd=tmp_path))


def test_defaults(tmp_path: Path) -> None:
    config = config_of([], tmp_path)
    assert config.input_jsonl_fpath == Path("in.jsonl")
    assert (config.num_repeats, config.limit, config.max_attempts) == (1, None, 3)
    assert config.head_server_url == DEFAULT_HEAD_SERVER_URL
    assert config.overwrite is False
    assert config.report is False


def test_the_documented_command_line_parses(tmp_path: Path) -> None:
    config = config_of(
        [
            "+agent_name=simple_agent",
            "+limit=10",
            "+num_repeats=4",
            "+num_samples_in_parallel=32",
            "+responses_create_params.temperature=0.7",
            "+responses_create_params.max_output_tokens=256",
            "+rollout_timeout_s=30",
            "+overwrite=true",
            "+report=true",
            "+agent_urls.simple_agent=http://127.0.0.1:9000/",
        ],
        tmp_path,
    )
    assert config.agent_name == "simple_agent"
    assert (config.limit, config.num_repeats, config.num_samples_in_parallel) == (10, 4, 32)
    assert config.responses_create_params == {"temperature": 0.7, "max_output_tokens": 256}
    assert config.rollout_timeout_s == 30.0
    assert config.overwrite is True
    assert config.report is True
    assert config.agent_urls == {"simple_agent": "http://127.0.0.1:9000"}


@pytest.mark.parametrize(
    ("block", "url"),
    [
        ("+head_server.port=12345", "http://127.0.0.1:12345"),
        ("+head_server={host: 10.0.0.5, port: 7}", "http://10.0.0.5:7"),
        ("+head_server={host: 0.0.0.0, port: 7}", "http://127.0.0.1:7"),
        ("+head_server.port=0", DEFAULT_HEAD_SERVER_URL),
    ],
)
def test_head_server_url_defaults_from_the_head_server_block(tmp_path: Path, block: str, url: str) -> None:
    assert config_of([block], tmp_path).head_server_url == url


def test_explicit_head_server_url_wins(tmp_path: Path) -> None:
    config = config_of(["+head_server.port=5", "+head_server_url=http://h:1/"], tmp_path)
    assert config.head_server_url == "http://h:1"


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("+num_repeats=0", "num_repeats: Input should be greater than or equal to 1, got 0"),
        ("+limit=-3", "limit"),
        ("+rollout_timeout_s=0", "rollout_timeout_s"),
        ("+head_server_url=localhost:11000", "expected an http(s) URL"),
        ("+agent_urls.a=localhost:1", "agent_urls.a: expected an http(s) URL"),
        ("+num_samples_in_parallel=many", "num_samples_in_parallel"),
    ],
)
def test_bad_values_name_key_and_value(tmp_path: Path, override: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_of([override], tmp_path)
    assert fragment in caught.value.message
    assert caught.value.message.startswith("<command line>")


def test_missing_paths_say_how_to_call_the_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        collect_config_from(compose_config(["+agent_name=a"], cwd=tmp_path))
    assert "input_jsonl_fpath" in caught.value.message
    assert "output_jsonl_fpath" in caught.value.message
    assert caught.value.hint is not None
    assert "ng_collect_rollouts" in caught.value.hint


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("+num_repeat=4", "num_repeats"), ("+agent_nme=x", "agent_name"), ("+reprot=true", "report")],
)
def test_near_miss_keys_are_errors_not_silently_ignored(tmp_path: Path, typo: str, meant: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_of([typo], tmp_path)
    assert f"unknown option of ng_collect_rollouts (did you mean +{meant}?)" in caught.value.message


def test_agent_map_parses_and_agent_name_may_not_contradict_its_default(tmp_path: Path) -> None:
    config = config_of(["+agent_map={old_agent: new_agent, _default: fallback}"], tmp_path)
    assert config.agent_map == {"old_agent": "new_agent", "_default": "fallback"}
    assert (
        config_of(["+agent_name=fallback", "+agent_map={_default: fallback}"], tmp_path).agent_name
        == "fallback"
    )
    with pytest.raises(ConfigError, match=r"conflicts with agent_map\._default"):
        config_of(["+agent_name=a", "+agent_map={_default: b}"], tmp_path)


@pytest.mark.parametrize(
    ("override", "instead"),
    [
        ("+rollout_collection_driver=my.module:run", "leave it out"),
        ("+input_glob=results/*.jsonl", "ng_aggregate_rollouts"),
        ("+prompt_config=prompt.yaml", "ng_materialize_prompts"),
    ],
)
def test_nemo_gym_options_not_offered_are_refused_by_name(
    tmp_path: Path, override: str, instead: str
) -> None:
    key = override[1:].split("=")[0]
    with pytest.raises(ConfigError) as caught:
        config_of([override], tmp_path)
    assert f"{key}: not offered by ng_collect_rollouts: NeMo Gym's +{key}" in caught.value.message
    assert instead in (caught.value.hint or "")
