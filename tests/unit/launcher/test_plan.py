"""`plan_stack`: what would start, where, with which spec; pure (no sockets, no processes)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ng_cli.errors import ConfigError
from ng_cli.launcher.plan import CHILD_MODULE, DEFAULT_HEAD_PORT, HEAD_NAME, head_url_from_config, plan_stack
from tests.fixtures.stack.harness import SECRET, STACK_ROOT, Compose

RUN_DIR = Path("/run/ng-test")


def test_every_instance_is_planned_with_its_app_and_kind(compose: Compose) -> None:
    plan = plan_stack(compose(), run_dir=RUN_DIR)

    rows = {server.name: server for server in plan.servers}
    assert list(rows) == ["tools_a", "tools_b", "policy_model", "relay"]
    assert rows["tools_a"].kind == "resources"
    assert rows["policy_model"].kind == "model"
    assert rows["relay"].kind == "agent"
    assert rows["relay"].app_path == STACK_ROOT / "responses_api_agents" / "relay_agent" / "app.py"
    assert rows["tools_b"].source is not None
    assert rows["tools_b"].source.startswith("configs/stack.yaml:")
    assert all(server.host == "127.0.0.1" and server.port == 0 for server in plan.servers)


def test_head_server_defaults_and_overrides(compose: Compose) -> None:
    default = plan_stack(compose(), run_dir=RUN_DIR).head
    moved = plan_stack(compose("++head_server.port=0", "++head_server.host=0.0.0.0"), run_dir=RUN_DIR).head

    assert (default.name, default.host, default.port, default.kind) == (
        HEAD_NAME,
        "127.0.0.1",
        DEFAULT_HEAD_PORT,
        "head",
    )
    assert default.app_path is None
    assert default.command == ()
    assert (moved.host, moved.port, moved.address) == ("0.0.0.0", 0, "0.0.0.0:auto")


def test_child_command_is_the_same_python_and_the_spec_path_only(compose: Compose) -> None:
    plan = plan_stack(compose(), run_dir=RUN_DIR)

    model = plan.server("policy_model")
    assert model.command == (sys.executable, "-m", CHILD_MODULE, str(RUN_DIR / "policy_model.spec.json"))
    assert not any(SECRET in part for server in plan.servers for part in server.command)


def test_specs_carry_every_neighbour_and_one_shared_secret(compose: Compose) -> None:
    plan = plan_stack(compose(), run_dir=RUN_DIR)
    ports = {name: 20000 + index for index, name in enumerate(p.name for p in plan.processes)}
    bound = plan.with_ports(ports)

    specs = [bound.spec_for(server.name, listen_fd=10 + i) for i, server in enumerate(bound.servers)]

    assert {spec.session_secret for spec in specs} == {plan.session_secret}
    assert all(spec.head_url == f"http://127.0.0.1:{ports[HEAD_NAME]}" for spec in specs)
    relay = next(spec for spec in specs if spec.name == "relay")
    assert relay.servers["policy_model"].url == f"http://127.0.0.1:{ports['policy_model']}"
    assert relay.servers["tools_a"].server_type == "resources_servers"
    assert set(relay.servers) == {"tools_a", "tools_b", "policy_model", "relay"}
    assert (relay.port, relay.config["port"], relay.listen_fd) == (ports["relay"], ports["relay"], 13)
    model = next(spec for spec in specs if spec.name == "policy_model")
    assert model.config["api_key"] == SECRET  # only the 0600 spec file holds it


def test_spec_needs_bound_ports(compose: Compose) -> None:
    plan = plan_stack(compose(), run_dir=RUN_DIR)

    assert not plan.is_bound
    with pytest.raises(ValueError, match="not bound"):
        plan.spec_for("tools_a", listen_fd=None)


def test_session_secret_is_random_and_never_in_repr(compose: Compose) -> None:
    config = compose()
    first, second = plan_stack(config, run_dir=RUN_DIR), plan_stack(config, run_dir=RUN_DIR)

    assert first.session_secret != second.session_secret
    assert len(first.session_secret) >= 32
    assert first.session_secret not in repr(first)
    assert SECRET not in repr(first)


def test_describe_masks_secrets_and_marks_free_ports(compose: Compose) -> None:
    rows = {row["name"]: row for row in plan_stack(compose(), run_dir=RUN_DIR).describe()}

    assert rows["policy_model"]["config"]["api_key"] == "***"
    assert SECRET not in repr(rows)
    assert rows["tools_a"]["address"] == "127.0.0.1:auto"
    assert rows[HEAD_NAME]["app_path"] == "(inside ng_run)"


def test_a_secret_interpolated_under_an_innocent_key_is_masked_but_planned(compose: Compose) -> None:
    plan = plan_stack(
        compose("++tools_a.resources_servers.echo_tools.greeting=Bearer ${policy_api_key}"), run_dir=RUN_DIR
    )
    rows = {row["name"]: row for row in plan.describe()}

    assert rows["tools_a"]["config"]["greeting"] == "Bearer ***"
    assert plan.masked_config["tools_a"]["resources_servers"]["echo_tools"]["greeting"] == "Bearer ***"
    assert SECRET not in repr(rows) + repr(plan.masked_config)
    assert plan.server("tools_a").config["greeting"] == f"Bearer {SECRET}"  # what the child gets
    assert plan.redactor().text(f"echoed {SECRET}") == "echoed ***"


def test_masked_config_is_what_the_head_serves(compose: Compose) -> None:
    plan = plan_stack(compose(), run_dir=RUN_DIR)

    assert plan.masked_config["policy_api_key"] == "***"
    assert SECRET not in repr(plan.masked_config)
    assert (
        plan.masked_config["tools_a"]["resources_servers"]["echo_tools"]["greeting"] == "hello from tools_a"
    )


def test_missing_entrypoint_names_instance_and_file(compose: Compose) -> None:
    config = compose("++tools_b.resources_servers.echo_tools.entrypoint=server.py")

    with pytest.raises(ConfigError) as caught:
        plan_stack(config, run_dir=RUN_DIR)

    message = caught.value.message
    assert "tools_b" in message
    assert "resources_servers/echo_tools" in message
    assert "<command line>  " in message  # where the bad entrypoint was set, not the instance
    assert "server.py" in message
    assert caught.value.hint is not None
    assert "app.py" in caught.value.hint


@pytest.mark.parametrize("port", ["70000", "-1", "'http'", "true"])
def test_bad_port_is_a_config_error(compose: Compose, port: str) -> None:
    config = compose(f"++tools_a.resources_servers.echo_tools.port={port}")

    with pytest.raises(ConfigError, match=r"instance 'tools_a'.*port.*0-65535"):
        plan_stack(config, run_dir=RUN_DIR)


def test_two_servers_asking_for_one_port_clash(compose: Compose) -> None:
    config = compose(
        "++tools_a.resources_servers.echo_tools.port=18080",
        "++relay.responses_api_agents.relay_agent.port=18080",
    )

    with pytest.raises(ConfigError, match=r"'relay' and 'tools_a' both ask for port 18080"):
        plan_stack(config, run_dir=RUN_DIR)


def test_fixed_ports_are_kept(compose: Compose) -> None:
    plan = plan_stack(compose("++tools_a.resources_servers.echo_tools.port=18081"), run_dir=RUN_DIR)

    assert plan.server("tools_a").port == 18081
    assert plan.server("tools_a").address == "127.0.0.1:18081"


@pytest.mark.parametrize("value", ["0", "-5", "'soon'"])
def test_ready_timeout_must_be_positive(compose: Compose, value: str) -> None:
    with pytest.raises(ConfigError, match="ready_timeout_s"):
        plan_stack(compose(f"+ready_timeout_s={value}"), run_dir=RUN_DIR)


def test_ready_timeout_is_read(compose: Compose) -> None:
    assert plan_stack(compose("+ready_timeout_s=7.5"), run_dir=RUN_DIR).ready_timeout_s == 7.5


def test_wildcard_host_is_dialled_on_loopback(compose: Compose) -> None:
    plan = plan_stack(compose("++tools_a.resources_servers.echo_tools.host=0.0.0.0"), run_dir=RUN_DIR)
    bound = plan.with_ports({"tools_a": 18082})

    assert bound.server("tools_a").url == "http://127.0.0.1:18082"
    assert bound.server("tools_a").host == "0.0.0.0"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ((), f"http://127.0.0.1:{DEFAULT_HEAD_PORT}"),
        (("++head_server.port=12345",), "http://127.0.0.1:12345"),
        (("+head_server_url=http://10.0.0.5:9000/",), "http://10.0.0.5:9000"),
    ],
)
def test_head_url_from_config(compose: Compose, overrides: tuple[str, ...], expected: str) -> None:
    assert head_url_from_config(compose(*overrides)) == expected


def test_port_error_points_at_where_the_port_was_set(compose: Compose, tmp_path: Path) -> None:
    extra = tmp_path / "ports.yaml"
    extra.write_text("tools_a:\n  resources_servers:\n    echo_tools:\n      port: 99999\n")

    with pytest.raises(ConfigError) as caught:
        plan_stack(compose(f"+config_paths=[{extra}]"), run_dir=RUN_DIR)

    assert caught.value.message.startswith(f"{extra}:4  instance 'tools_a'")


def test_agent_workers_get_a_spec_file_each_and_other_kinds_refuse_them(compose: Compose) -> None:
    plan = plan_stack(compose("++relay.responses_api_agents.relay_agent.num_workers=3"), run_dir=RUN_DIR)

    relay = plan.server("relay")
    assert relay.workers == 3
    assert [relay.worker_spec_path(i).name for i in range(3)] == [
        "relay.spec.json",
        "relay.w1.spec.json",
        "relay.w2.spec.json",
    ]
    assert [relay.worker_name(i) for i in range(3)] == ["relay", "relay#1", "relay#2"]
    with pytest.raises(ConfigError, match="num_workers applies to agents only"):
        plan_stack(compose("++tools_a.resources_servers.echo_tools.num_workers=2"), run_dir=RUN_DIR)
