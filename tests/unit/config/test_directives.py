"""NeMo Gym's `_inherit_from`, `_copy`, `_delete_key` through compose_config, and environment relays."""

from __future__ import annotations

import re
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


@pytest.mark.usefixtures("repo")
def test_inherit_moves_the_source_and_local_keys_win(cwd: Path, write: WriteFile) -> None:
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


@pytest.mark.usefixtures("repo")
def test_copy_keeps_the_source_and_delete_key_drops_keys(cwd: Path, write: WriteFile) -> None:
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


@pytest.mark.usefixtures("repo")
def test_a_path_not_in_the_config_names_the_directive_line(cwd: Path, write: WriteFile) -> None:
    path = write(cwd / "c.yaml", "echo:\n  _inherit_from: nowhere.at_all\n")
    with pytest.raises(ConfigError) as caught:
        compose_config([f"+config_paths=[{path}]"], cwd=cwd)
    assert "c.yaml:2" in caught.value.message
    assert "_inherit_from names 'nowhere.at_all'" in caught.value.message


@pytest.mark.usefixtures("repo")
def test_legacy_agent_environment_server_is_a_relay_to_its_agent(cwd: Path) -> None:
    config = compose_config(
        [
            "+config_paths=[conf/agent.yaml]",
            "++env.environment_servers.legacy_agent.entrypoint=app.py",
            "++env.environment_servers.legacy_agent.agent_server={type: responses_api_agents, name: echo_agent}",
        ],
        cwd=cwd,
    )
    assert {name: relay.agent for name, relay in config.relays.items()} == {"env": "echo_agent"}


@pytest.mark.usefixtures("repo")
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
def test_an_environment_server_is_never_dropped_unsaid(cwd: Path, override: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        compose_config(["+config_paths=[conf/agent.yaml]", override], cwd=cwd)
    assert expected in caught.value.message


def test_a_chain_of_directives_is_resolved_to_its_end(repo: Path, cwd: Path, write: WriteFile) -> None:
    path = write(
        repo / "conf/c.yaml",
        """
first: {_copy: second, from_first: 1}
second: {_inherit_from: third, from_second: 2}
third: {_copy: fourth, from_third: 3}
fourth:
  from_fourth: 4
  nested: {_copy: fifth}
fifth: {from_fifth: 5}
alias: ${copy:first}
""",
    )
    config = compose_config([f"+config_paths=[{path}]"], cwd=cwd)
    everything = {
        "from_first": 1,
        "from_second": 2,
        "from_third": 3,
        "from_fourth": 4,
        "nested": {"from_fifth": 5},
    }
    assert config.get("first") == everything
    assert config.get("alias") == everything
    assert "third" not in config.tree  # moved into second (itself copied into first)
    assert "_copy" not in str(config.tree)
    assert "_inherit_from" not in str(config.tree)
    # a key brought along the chain keeps the line it was written on
    assert config.sources["first.from_fourth"].endswith("conf/c.yaml:5")
    assert config.sources["first.nested.from_fifth"].endswith("conf/c.yaml:7")
    assert config.sources["first.from_first"].endswith("conf/c.yaml:1")


@pytest.mark.parametrize(
    ("text", "chain"),
    [
        ("a: {_copy: a}\n", "a._copy: a (conf/c.yaml:1) -> a"),
        (
            "a: {_copy: b, x: 1}\nb: {_inherit_from: c}\nc: {_copy: a}\n",
            "a._copy: b (conf/c.yaml:1) -> b._inherit_from: c (conf/c.yaml:2) -> c._copy: a (conf/c.yaml:3) -> a",
        ),
        ("a:\n  x:\n    _copy: a\n", "a.x._copy: a (conf/c.yaml:3) -> a.x"),
        (
            "a: ${copy:b}\nb: ${inherit_from:a}\n",
            "a._copy: b (conf/c.yaml:1) -> b._inherit_from: a (conf/c.yaml:2) -> a",
        ),
    ],
    ids=["self", "three", "inside-itself", "string-forms"],
)
def test_a_cycle_of_directives_is_refused_with_its_chain(
    repo: Path, cwd: Path, write: WriteFile, text: str, chain: str
) -> None:
    path = write(repo / "conf/c.yaml", text)
    with pytest.raises(ConfigError) as caught:
        compose_config([f"+config_paths=[{path}]"], cwd=cwd)
    assert re.match(r"conf/c\.yaml:\d+  ", caught.value.message)  # file:line first, as every config error
    assert f"the directives form a cycle: {chain}" in caught.value.message


def test_a_chain_too_long_to_follow_is_refused(repo: Path, cwd: Path, write: WriteFile) -> None:
    links = "".join(f"k{i}: {{_copy: k{i + 1}}}\n" for i in range(2000))
    path = write(repo / "conf/c.yaml", links + "k2000: {v: 1}\n")
    with pytest.raises(ConfigError, match=r"^conf/c\.yaml:1  k0\._copy: a chain of more than 100 directives"):
        compose_config([f"+config_paths=[{path}]"], cwd=cwd)


@pytest.mark.usefixtures("repo")
def test_delete_key_of_an_absent_key_is_let_be_unless_a_directive_should_bring_it(
    cwd: Path, write: WriteFile
) -> None:
    """NeMo Gym (`_recursively_swap_keys_helper`) deletes what is there in a plain block and lets an
    absent key be (`benchmarks/nemotron_3_ultra/judge_local_endpoints.yaml` deletes the
    `vllm_model` of the file it is composed with); after `_copy`/`_inherit_from` each key must exist."""
    plain = write(cwd / "plain.yaml", BASE + "  _delete_key: vllm_model, domain\n")
    config = compose_config([f"+config_paths=[{plain}]"], cwd=cwd)
    assert config.get("base_env.resources_servers.echo_env.greeting") == "from base"
    assert "_delete_key" not in config.get("base_env")
    copied = write(
        cwd / "copied.yaml",
        BASE
        + """
echo:
  resources_servers:
    echo_env:
      _copy: base_env.resources_servers.echo_env
      _delete_key: "no_such_key"
""",
    )
    with pytest.raises(ConfigError) as caught:
        compose_config([f"+config_paths=[{copied}]"], cwd=cwd)
    assert "no key 'no_such_key' to delete" in caught.value.message
