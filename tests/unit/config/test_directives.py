"""NeMo Gym's `_inherit_from`, `_copy`, `_delete_key` through compose_config, and environment relays."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ng_cli.config.compose import compose_config
from ng_cli.errors import ConfigError

WriteFile = Callable[[Path, str], Path]
BASE = """
base_env:
  resources_servers:
    echo_env:
      entrypoint: app.py
      greeting: from base
      domain: agent
"""


def test_inherit_moves_the_source_and_local_keys_win(repo: Path, cwd: Path, write: WriteFile) -> None:
    path = write(
        cwd / "c.yaml",
        BASE
        + """
echo:
  _inherit_from: base_env
  resources_servers:
    echo_env:
      greeting: mine
""",
    )
    config = compose_config([f"+config_paths=[{path}]"], cwd=cwd)
    assert list(config.instances) == ["echo"]  # base_env was moved, not copied
    assert config.get("echo.resources_servers.echo_env") == {
        "entrypoint": "app.py",
        "greeting": "mine",
        "domain": "agent",
    }
    # An inherited key keeps the line it was written on; a local one its own.
    assert config.sources["echo.resources_servers.echo_env.domain"].endswith("c.yaml:6")
    assert config.sources["echo.resources_servers.echo_env.greeting"].endswith("c.yaml:12")


def test_copy_keeps_the_source_and_delete_key_drops_keys(repo: Path, cwd: Path, write: WriteFile) -> None:
    path = write(
        cwd / "c.yaml",
        BASE
        + """
echo:
  resources_servers:
    echo_env:
      _copy: base_env.resources_servers.echo_env
      _delete_key: "domain"
greeting_copy: ${copy:base_env.resources_servers.echo_env.greeting}
""",
    )
    config = compose_config([f"+config_paths=[{path}]"], cwd=cwd)
    assert list(config.instances) == ["base_env", "echo"]
    assert config.get("echo.resources_servers.echo_env") == {"entrypoint": "app.py", "greeting": "from base"}
    assert config.get("greeting_copy") == "from base"


def test_a_path_not_in_the_config_names_the_directive_line(repo: Path, cwd: Path, write: WriteFile) -> None:
    path = write(cwd / "c.yaml", "echo:\n  _inherit_from: nowhere.at_all\n")
    with pytest.raises(ConfigError) as caught:
        compose_config([f"+config_paths=[{path}]"], cwd=cwd)
    assert "c.yaml:2" in caught.value.message
    assert "_inherit_from names 'nowhere.at_all'" in caught.value.message


def test_legacy_agent_environment_server_is_a_relay_to_its_agent(repo: Path, cwd: Path) -> None:
    config = compose_config(
        [
            "+config_paths=[conf/agent.yaml]",
            "++env.environment_servers.legacy_agent.entrypoint=app.py",
            "++env.environment_servers.legacy_agent.agent_server={type: responses_api_agents, name: echo_agent}",
        ],
        cwd=cwd,
    )
    assert {name: relay.agent for name, relay in config.relays.items()} == {"env": "echo_agent"}


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "++env.environment_servers.single_agent_turn_legacy.entrypoint=app.py",
            "environment server 'single_agent_turn_legacy' cannot be started here",
        ),
        (
            "++env.environment_servers.legacy_agent.agent_server={type: responses_api_agents, name: echo_agnt}",
            "no agent instance named 'echo_agnt'; did you mean 'echo_agent'?",
        ),
    ],
)
def test_an_environment_server_is_never_dropped_unsaid(
    repo: Path, cwd: Path, override: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        compose_config(["+config_paths=[conf/agent.yaml]", override], cwd=cwd)
    assert expected in caught.value.message
