"""NeMo Gym's `global_aiohttp_connector_limit*`: accepted by every command, refused when bad, and
turned into the connection pools of every server of a stack and of the collector.

TRL's NeMo Gym example and NeMo RL's actor start their stack with both keys set; ng_run refused
them (exit 2, unknown option) before they were honoured.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.config.command_options import command_options
from ng_cli.config.run_options import RunOptions
from ng_cli.errors import ConfigError
from ng_cli.launcher.plan import plan_stack
from ng_cli.rollouts.config import collect_config_from
from ng_cli.servers.http import ConnectionLimits, HttpClient
from tests.fixtures.stack.harness import Compose

LIMITS = ["+global_aiohttp_connector_limit=65536", "+global_aiohttp_connector_limit_per_host=16384"]


def bound(compose: Compose, *overrides: str) -> dict[str, ConnectionLimits | None]:
    """Each server's spec's limits, ports filled in as the launcher fills them."""
    plan = plan_stack(compose(*overrides), run_dir=Path("/run/ng-test"))
    plan = plan.with_ports({server.name: 40000 + i for i, server in enumerate(plan.processes)})
    return {server.name: plan.spec_for(server.name, listen_fd=None).http_limits for server in plan.servers}


def test_ng_run_accepts_both_keys_and_every_spec_carries_them(compose: Compose) -> None:
    command_options(compose(*LIMITS), RunOptions, command="ng_run")  # no "unknown option"

    specs = bound(compose, *LIMITS)

    assert set(specs) == {"tools_a", "tools_b", "policy_model", "relay"}
    assert set(specs.values()) == {ConnectionLimits(total=65536, per_host=16384)}


def test_one_key_alone_keeps_the_other_default_and_none_leaves_every_server_its_own(compose: Compose) -> None:
    assert set(bound(compose, "+global_aiohttp_connector_limit_per_host=8").values()) == {
        ConnectionLimits(total=ConnectionLimits().total, per_host=8)
    }
    assert set(bound(compose).values()) == {None}


@pytest.mark.parametrize(
    ("override", "shown"),
    [
        ("+global_aiohttp_connector_limit=-1", "global_aiohttp_connector_limit"),
        ("+global_aiohttp_connector_limit_per_host=many", "global_aiohttp_connector_limit_per_host"),
    ],
)
def test_a_bad_limit_is_refused_naming_the_key(compose: Compose, override: str, shown: str) -> None:
    with pytest.raises(ConfigError, match=shown):
        command_options(compose(override), RunOptions, command="ng_run")
    with pytest.raises(ConfigError, match=shown):
        plan_stack(compose(override), run_dir=Path("/run/ng-test"))


def test_the_collector_reads_them(compose: Compose) -> None:
    options = collect_config_from(
        compose(*LIMITS, "+input_jsonl_fpath=in.jsonl", "+output_jsonl_fpath=o.jsonl")
    )

    assert (options.global_aiohttp_connector_limit, options.global_aiohttp_connector_limit_per_host) == (
        65536,
        16384,
    )


def test_nemo_gym_s_other_aiohttp_keys_are_refused_with_the_reason(compose: Compose) -> None:
    with pytest.raises(
        ConfigError, match="global_aiohttp_client_request_debug: not offered by ng_run"
    ) as caught:
        command_options(compose("+global_aiohttp_client_request_debug=true"), RunOptions, command="ng_run")
    assert "connection limits" in (caught.value.hint or "") + str(caught.value)


async def test_an_http_client_pool_takes_the_limits_until_it_is_made() -> None:
    client = HttpClient()
    client.limit_connections(ConnectionLimits(total=7, per_host=3))
    try:
        connector = client.session.connector
        assert connector is not None
        assert (connector.limit, connector.limit_per_host) == (7, 3)
        with pytest.raises(RuntimeError, match="already made its connection pool"):
            client.limit_connections(ConnectionLimits(total=9))
    finally:
        await client.close()
