"""ng_run's ready table and ng_status's table tell apart two nodes on one host (issue 42): each Ray
actor's row shows its node's address and the short form of its node id."""

from __future__ import annotations

from pathlib import Path

from ng_cli.launcher.plan import plan_stack
from ng_cli.launcher.render import ready_table, status_table
from tests.fixtures.stack.harness import Compose
from tests.unit.launcher.test_render import render

NODE_A = "5c1e2a9b" + "0" * 48
NODE_B = "d3f07e41" + "1" * 48
"""Two raylets on one host: one address, two node ids (Ray's ids are 56 hex digits)."""


def _server(name: str, node_id: str, port: int) -> dict[str, object]:
    return {
        "name": name, "kind": "resources", "implementation": "echo_tools", "url": f"http://10.0.0.7:{port}",
        "pid": port, "node": "10.0.0.7", "node_id": node_id, "actor": f"ng-ab12-server-{name}",
    }  # fmt: skip


def test_two_nodes_on_one_host_are_told_apart_by_their_node_ids(compose: Compose) -> None:
    plan = plan_stack(
        compose("++ray.address=local", "++ray.servers=[tools_a,tools_b]"), run_dir=Path("/tmp/x")
    )
    plan = plan.with_ports({"head_server": 1234}).with_addresses(
        {"tools_a": ("10.0.0.7", 2345), "tools_b": ("10.0.0.7", 2346)}
    )
    servers = [_server("tools_a", NODE_A, 2345), _server("tools_b", NODE_B, 2346)]

    for text in (
        render(ready_table(plan, servers, {"tools_a": 0.5, "tools_b": 0.6})),
        render(status_table("http://h:1", servers, {"tools_a": True, "tools_b": True})),
    ):
        row_a = next(line for line in text.splitlines() if "ng-ab12-server-tools_a" in line)
        row_b = next(line for line in text.splitlines() if "ng-ab12-server-tools_b" in line)
        assert "10.0.0.7 node 5c1e2a9b ng-ab12-server-tools_a" in row_a
        assert "10.0.0.7 node d3f07e41 ng-ab12-server-tools_b" in row_b
        assert NODE_A not in text  # the short form: the table stays narrow
