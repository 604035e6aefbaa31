"""The `ray` block: validated with errors that name `ray.<key>`, and what it changes in the plan (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.errors import ConfigError
from ng_cli.launcher.plan import plan_stack
from ng_cli.launcher.ray.config import read_ray_config
from tests.fixtures.stack.harness import Compose

RUN_DIR = Path("/run/ng-test")
NAMES = ["tools_a", "tools_b", "policy_model", "relay"]


def test_no_ray_block_means_plain_processes(compose: Compose) -> None:
    config = compose()
    assert read_ray_config(config, NAMES) is None
    plan = plan_stack(config, run_dir=RUN_DIR)
    assert plan.ray is None
    assert plan.placement is None
    assert not any(plan.is_actor(name) for name in NAMES)


@pytest.mark.parametrize("address", ["auto", "local", "ray://head:10001", "10.0.0.1:6379"])
def test_addresses_ray_accepts(compose: Compose, address: str) -> None:
    ray = read_ray_config(compose(f"++ray.address={address}"), NAMES)
    assert ray is not None
    assert ray.address == address
    assert ray.is_local == (address == "local")


def test_a_bare_string_is_the_address(compose: Compose) -> None:
    ray = read_ray_config(compose("++ray=auto"), NAMES)
    assert ray is not None
    assert ray.address == "auto"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["++ray.address=cluster"],
            "ray.address: expected auto, local, ray://host:port or host:port, got 'cluster'",
        ),
        (["++ray.servers=[tools_a]"], "ray.address: required"),
        (["++ray.address=auto", "++ray.adress=x"], "ray.adress: unknown key (known: address,"),
        (
            ["++ray.address=auto", "++ray.engine_num_cpus=0"],
            "ray.engine_num_cpus: Input should be greater than 0",
        ),
        (
            ["++ray.address=auto", "++ray.servers=[tools_c]"],
            "ray.servers: no server instance named 'tools_c'",
        ),
        (["++ray=[1,2]"], "ray: expected a mapping such as {address: auto}"),
        (
            ["++ray.address=ray://head:10001", "++ray.servers=[tools_a]"],
            "servers_listen_on: loopback runs the server actors on ng_run's node, and a Ray Client",
        ),
        (["++ray.address=auto", "++ray.servers_listen_on=all"], "ray.servers_listen_on: Input should be"),
        (
            ["++ray.address=auto", "++ray.runtime_env={env_vars: {HF_TOKEN: x}}"],
            "ray.runtime_env: env_vars ['HF_TOKEN'] look secret",
        ),
    ],
)
def test_bad_ray_blocks_name_the_key(compose: Compose, overrides: list[str], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_ray_config(compose(*overrides), NAMES)
    assert expected in str(caught.value)


def test_server_actors_listen_on_loopback_unless_told_otherwise(compose: Compose) -> None:
    ray = read_ray_config(compose("++ray.address=auto", "++ray.servers=all"), NAMES)
    assert ray is not None
    assert ray.servers_listen_on == "loopback"
    client = read_ray_config(
        compose("++ray.address=ray://head:10001", "++ray.servers=all", "++ray.servers_listen_on=node"), NAMES
    )
    assert client is not None
    assert client.servers_listen_on == "node"


def test_servers_as_actors_all_a_list_or_cpus_per_name(compose: Compose) -> None:
    def actors(*overrides: str) -> dict[str, float]:
        ray = read_ray_config(compose("++ray.address=auto", *overrides), NAMES)
        assert ray is not None
        return ray.actor_servers(NAMES)

    assert actors() == {}
    assert actors("++ray.servers=all", "++ray.server_num_cpus=2") == dict.fromkeys(NAMES, 2.0)
    assert actors("++ray.servers=[relay]") == {"relay": 1.0}
    assert actors("++ray.servers={tools_a: 4}") == {"tools_a": 4.0}


def test_the_plan_carries_the_placement_and_which_servers_are_actors(compose: Compose) -> None:
    plan = plan_stack(compose("++ray.address=local", "++ray.servers=[tools_a,relay]"), run_dir=RUN_DIR)

    assert plan.placement is not None
    assert plan.placement.groups == ()  # no local_vllm_model in the fixture stack
    assert plan.placement.server_cpus == {"tools_a": 1.0, "relay": 1.0}
    assert [name for name in NAMES if plan.is_actor(name)] == ["tools_a", "relay"]
    assert plan.placement.server_actor("relay") == f"ng-{plan.placement.run_id}-server-relay"
    other = plan_stack(compose("++ray.address=local", "++ray.servers=[relay]"), run_dir=RUN_DIR)
    assert other.placement is not None
    assert other.placement.run_id != plan.placement.run_id  # two ng_runs on one cluster never collide


def test_an_agent_with_several_workers_cannot_be_one_actor(compose: Compose) -> None:
    with pytest.raises(ConfigError) as caught:
        plan_stack(
            compose(
                "++ray.address=auto",
                "++ray.servers=[relay]",
                "++relay.responses_api_agents.relay_agent.num_workers=2",
            ),
            run_dir=RUN_DIR,
        )
    assert "ray.servers: 'relay' has num_workers 2" in str(caught.value)
