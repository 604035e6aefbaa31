"""Server instances: shape, known implementations, and references between instances."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ng_cli.config.compose import compose_config
from ng_cli.config.instances import owner_of
from ng_cli.errors import ConfigError

WriteFile = Callable[[Path, str], Path]


def _compose(repo: Path, cwd: Path, write: WriteFile, text: str, *overrides: str) -> None:
    write(repo / "conf/case.yaml", text)
    compose_config(["+config_paths=[conf/case.yaml]", *overrides], cwd=cwd)


@pytest.mark.usefixtures("repo")
def test_instances_are_found_with_their_source(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/agent.yaml]"], cwd=cwd)
    agent = config.instances["echo_agent"]
    assert (agent.server_type, agent.implementation) == ("responses_api_agents", "simple_agent")
    assert agent.block["model_server"] == {"type": "responses_api_models", "name": "policy_model"}
    assert agent.source == "conf/agent.yaml:2"
    assert config.instances["policy_model"].source == "conf/model.yaml:2"
    assert agent.key == "echo_agent.responses_api_agents.simple_agent"
    assert agent.kind == "responses_api_agents/simple_agent"


@pytest.mark.usefixtures("repo")
def test_an_instance_defined_on_the_command_line_has_that_source(cwd: Path) -> None:
    config = compose_config(["+extra.resources_servers.math_env.entrypoint=app.py"], cwd=cwd)
    assert config.instances["extra"].source == "<command line>"


def test_unknown_implementation_lists_the_available_ones(repo: Path, cwd: Path, write: WriteFile) -> None:
    text = """
    # a comment so the instance is not on line 1
    mathy:
      resources_servers:
        math_evn:
          entrypoint: app.py
    """
    with pytest.raises(ConfigError) as caught:
        _compose(repo, cwd, write, text)
    assert str(caught.value) == (
        "unknown implementation 'math_evn' for resources_servers (instance 'mathy', from conf/case.yaml:4); "
        "available: echo_env, math_env"
    )


def test_available_implementations_come_from_the_repo_root(repo: Path, cwd: Path, write: WriteFile) -> None:
    (repo / "resources_servers" / "new_env").mkdir()
    _compose(repo, cwd, write, "n:\n  resources_servers:\n    new_env:\n      entrypoint: app.py\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "x:\n  resources_servers:\n    echo_env: {entrypoint: app.py}\n  responses_api_models:\n    vllm_model: {entrypoint: app.py}\n",
            "conf/case.yaml:1  x: a server instance has exactly one key, its server type (resources_servers here); "
            "also found: responses_api_models",
        ),
        (
            "x:\n  resources_servers:\n    echo_env: {entrypoint: app.py}\n  port: 3\n",
            "also found: port",
        ),
        (
            "x:\n  resources_servers:\n    echo_env: {entrypoint: app.py}\n    math_env: {entrypoint: app.py}\n",
            "conf/case.yaml:2  x.resources_servers: expected exactly one implementation "
            "(a folder under resources_servers/); found: echo_env, math_env",
        ),
        ("x:\n  resources_servers: {}\n", "found: none"),
        (
            "x:\n  resources_servers:\n    echo_env: app.py\n",
            "conf/case.yaml:3  x.resources_servers.echo_env: expected a mapping with at least 'entrypoint', got str",
        ),
        (
            "x:\n  resources_servers:\n    echo_env:\n      port: 3\n",
            "conf/case.yaml:3  x.resources_servers.echo_env.entrypoint: missing required key 'entrypoint' "
            "in instance 'x' (resources_servers/echo_env)",
        ),
        (
            "x:\n  resource_servers:\n    echo_env: {entrypoint: app.py}\n",
            "conf/case.yaml:2  x.resource_servers: unknown server type 'resource_servers'; "
            "did you mean 'resources_servers'?",
        ),
    ],
    ids=[
        "two-types",
        "extra-key",
        "two-implementations",
        "no-implementation",
        "block-not-mapping",
        "no-entrypoint",
        "misspelt-type",
    ],
)
def test_shape_errors(repo: Path, cwd: Path, write: WriteFile, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _compose(repo, cwd, write, text)
    assert expected in str(caught.value)


def test_all_shape_problems_are_reported_at_once(repo: Path, cwd: Path, write: WriteFile) -> None:
    text = "a:\n  resources_servers:\n    nope: {entrypoint: app.py}\nb:\n  responses_api_models: {}\n"
    with pytest.raises(ConfigError) as caught:
        _compose(repo, cwd, write, text)
    message = str(caught.value)
    assert message.startswith("2 problems in the config:")
    assert "unknown implementation 'nope'" in message
    assert "b.responses_api_models: expected exactly one implementation" in message


def test_unrelated_top_level_mappings_are_not_instances(repo: Path, cwd: Path, write: WriteFile) -> None:
    write(repo / "conf/case.yaml", "head_server:\n  host: 127.0.0.1\n  port: 11000\n")
    assert compose_config(["+config_paths=[conf/case.yaml]"], cwd=cwd).instances == {}


@pytest.mark.usefixtures("repo")
def test_reference_to_a_missing_instance_suggests_the_closest(cwd: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        compose_config(
            [
                "+config_paths=[conf/agent.yaml]",
                "echo_agent.responses_api_agents.simple_agent.model_server.name=polcy_model",
            ],
            cwd=cwd,
        )
    assert str(caught.value) == (
        "<command line>  echo_agent.responses_api_agents.simple_agent.model_server: "
        "no responses_api_models instance named 'polcy_model'; did you mean 'policy_model'?"
    )


@pytest.mark.usefixtures("repo")
def test_reference_with_nothing_close_lists_the_instances_of_that_type(cwd: Path) -> None:
    with pytest.raises(ConfigError, match=r"\(resources_servers instances: echo\)"):
        compose_config(
            [
                "+config_paths=[conf/agent.yaml]",
                "echo_agent.responses_api_agents.simple_agent.resources_server.name=zzz",
            ],
            cwd=cwd,
        )


@pytest.mark.usefixtures("repo")
def test_reference_to_an_instance_of_another_type(cwd: Path) -> None:
    with pytest.raises(
        ConfigError, match="'policy_model' is a responses_api_models instance, not resources_servers"
    ):
        compose_config(
            [
                "+config_paths=[conf/agent.yaml]",
                "echo_agent.responses_api_agents.simple_agent.resources_server.name=policy_model",
            ],
            cwd=cwd,
        )


def test_references_inside_lists_are_checked_with_their_line(repo: Path, cwd: Path, write: WriteFile) -> None:
    text = """
    config_paths: [conf/model.yaml]
    judge:
      resources_servers:
        math_env:
          entrypoint: app.py
          judges:
            - {type: responses_api_models, name: policy_model}
            - {type: responses_api_models, name: judge_model}
    """
    with pytest.raises(ConfigError) as caught:
        _compose(repo, cwd, write, text)
    assert str(caught.value).startswith("conf/case.yaml:8  judge.resources_servers.math_env.judges.1: ")


def test_owner_of() -> None:
    assert (
        owner_of("p.responses_api_models.vllm_model.api_key")
        == "instance 'p' (responses_api_models/vllm_model)"
    )
    assert owner_of("policy_api_key") is None
    assert owner_of("head_server.port.x") is None


def test_reference_to_an_unconfigured_type_points_at_config_files(
    repo: Path, cwd: Path, write: WriteFile
) -> None:
    write(repo / "responses_api_models/vllm_model/configs/vllm_model.yaml", "policy_model: {}\n")
    text = """
    agent:
      responses_api_agents:
        simple_agent:
          entrypoint: app.py
          model_server: {type: responses_api_models, name: policy_model}
    """
    with pytest.raises(ConfigError) as caught:
        _compose(repo, cwd, write, text)
    assert "(responses_api_models instances: none in this config)" in str(caught.value)
    assert caught.value.hint == (
        "no responses_api_models instance is configured; add a config that defines one to config_paths, "
        "e.g. responses_api_models/vllm_model/configs/vllm_model.yaml"
    )
