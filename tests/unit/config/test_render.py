"""render_yaml: masked YAML in tree order, with `# from:` lines on request."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ng_cli.config.compose import compose_config
from ng_cli.config.render import render_yaml
from ng_cli.config.secrets import MASK


@pytest.mark.usefixtures("repo")
def test_masked_yaml_round_trips_without_secrets(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/agent.yaml]"], cwd=cwd)
    text = render_yaml(config)
    secret = config.get("policy_api_key")
    assert secret not in text
    loaded = yaml.safe_load(text)
    assert loaded["policy_api_key"] == MASK
    assert loaded["policy_model"]["responses_api_models"]["vllm_model"]["api_key"] == MASK
    assert loaded["echo_agent"] == config.tree["echo_agent"]
    assert list(loaded) == list(config.tree)


@pytest.mark.usefixtures("repo")
def test_unmasked_on_request(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/model.yaml]"], cwd=cwd)
    assert config.get("policy_api_key") in render_yaml(config, masked=False)


@pytest.mark.usefixtures("repo")
def test_sources_comment_above_each_instance(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/agent.yaml]", "+policy_model_name=m"], cwd=cwd)
    lines = render_yaml(config, with_sources=True).splitlines()
    for name, instance in config.instances.items():
        assert lines[lines.index(f"{name}:") - 1] == f"# from: {instance.source}"
    assert lines[lines.index("policy_model_name: m") - 1] == "# from: <command line>"
    assert yaml.safe_load("\n".join(lines)) == yaml.safe_load(render_yaml(config))


@pytest.mark.usefixtures("repo")
def test_empty_tree(cwd: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("NG_ENV_YAML")
    assert render_yaml(compose_config([], cwd=cwd)) == "{}\n"
