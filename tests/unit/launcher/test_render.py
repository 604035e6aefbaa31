"""The launcher's tables, rendered to a string the way rich's own tests do."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ng_cli.launcher.plan import plan_stack
from ng_cli.launcher.render import placement_table, plan_table, ready_table, status_table, suites_table
from ng_cli.launcher.server_tests import SuiteResult
from tests.fixtures.stack.harness import SECRET, Compose


def render(table: Table) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(table)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def test_plan_table_shows_free_ports_as_auto(compose: Compose) -> None:
    text = render(plan_table(plan_stack(compose(), run_dir=Path("/tmp/x"))))

    assert "dry run" in text
    assert "127.0.0.1:auto" in text
    assert "127.0.0.1:11000" in text
    assert SECRET not in text


def test_ready_table_lists_urls_pids_and_seconds(compose: Compose) -> None:
    plan = plan_stack(compose(), run_dir=Path("/tmp/x")).with_ports({"head_server": 1234, "tools_a": 2345})
    servers = [
        {
            "name": "tools_a",
            "kind": "resources",
            "implementation": "echo_tools",
            "url": "http://127.0.0.1:2345",
            "pid": 42,
        }
    ]

    text = render(ready_table(plan, servers, {"head_server": 0.05, "tools_a": 1.234}))

    row = next(line for line in text.splitlines() if "tools_a" in line)
    assert "http://127.0.0.1:2345" in row
    assert "42" in row
    assert "1.23" in row
    assert "http://127.0.0.1:1234" in text


def test_status_table_marks_up_and_down() -> None:
    servers = [
        {
            "name": "a",
            "server_type": "resources_servers",
            "implementation": "x",
            "url": "http://h:1",
            "pid": 1,
        },
        {"name": "b", "kind": "model", "implementation": "y", "url": "http://h:2", "pid": 2},
    ]

    lines = render(status_table("http://h:0", servers, {"a": True, "b": False})).splitlines()

    assert "up" in next(line for line in lines if "http://h:1" in line)
    assert "down" in next(line for line in lines if "http://h:2" in line)


def test_suites_table() -> None:
    text = render(suites_table([SuiteResult(Path("/r/a"), 0, 1.0), SuiteResult(Path("/r/b"), 2, 0.5)]))

    assert "passed" in text
    assert "failed (pytest exit code 2)" in text


def test_on_ray_the_tables_say_which_node_and_actor(compose: Compose) -> None:
    plan = plan_stack(compose("++ray.address=local", "++ray.servers=[tools_a]"), run_dir=Path("/tmp/x"))
    assert plan.placement is not None
    placement = render(placement_table(plan.placement, address="local"))
    assert f"ng-{plan.placement.run_id}-server-tools_a" in placement
    assert "1 CPU " in placement

    plan = plan.with_ports({"head_server": 1234}).with_addresses({"tools_a": ("10.0.0.7", 2345)})
    actor = {"node": "10.0.0.7", "actor": "ng-ab12-server-tools_a", "actor_pid": 99}
    server = {"name": "tools_a", "kind": "resources", "implementation": "echo_tools",
              "url": "http://10.0.0.7:2345", "pid": 4321, **actor}  # fmt: skip
    ready = render(ready_table(plan, [server], {"tools_a": 0.5}))
    assert "10.0.0.7 ng-ab12-server-tools_a" in ready
    status = render(status_table("http://h:1", [server, {**server, "name": "local", "actor": None}], {}))
    assert "10.0.0.7 ng-ab12-server-tools_a" in status
    assert "10.0.0.7 (local process)" in status
