"""Rich tables for the launcher's commands: the plan (dry run), the ready stack, its status."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from rich.table import Table
from rich.text import Text

from ng_cli.config.paths import display_path
from ng_cli.engines.placement import PlacementPlan, cpus_text
from ng_cli.engines.plan import InstanceEngines
from ng_cli.launcher.plan import StackPlan
from ng_cli.launcher.server_tests import SuiteResult

__all__ = [
    "engine_notes",
    "engines_table",
    "placement_table",
    "plan_table",
    "ready_table",
    "status_table",
    "suites_table",
]


def plan_table(plan: StackPlan) -> Table:
    """What `ng_run` would start: one row per process."""
    table = Table(title="ng_run plan (dry run: nothing started)", title_justify="left")
    table.add_column("name", no_wrap=True)
    for column in ("kind", "implementation", "address", "from"):
        table.add_column(column)
    for row in plan.describe():
        table.add_row(row["name"], row["kind"], row["implementation"], row["address"], row["source"])
    return table


def engines_table(plans: Iterable[InstanceEngines], title: str = "vLLM engines (started first)") -> Table:
    """The engine plan: which engines, on which devices, with which data/expert-parallel layout."""
    table = Table(title=title, title_justify="left")
    for column in ("engine", "devices", "address", "TP", "PP", "DP", "EP", "mode", "group"):
        table.add_column(column, no_wrap=column in ("engine", "address"))
    for plan in plans:
        for engine in plan.engines:
            row = engine.describe()
            table.add_row(
                row["name"], row["devices"], row["address"], str(row["tp"]), str(row["pp"]),
                row["dp"], str(row["ep"]), plan.mode, str(row["group"]),
            )  # fmt: skip
    return table


def placement_table(placement: PlacementPlan, *, address: str) -> Table:
    """The Ray placement groups (one per engine or expert group) and the server actors."""
    table = Table(
        title=f"Ray placement (ray.address {address}, run {placement.run_id})", title_justify="left"
    )
    for column in ("placement group / actor", "strategy", "needs", "engines"):
        table.add_column(column, no_wrap=column == "placement group / actor")
    for row in placement.describe():
        table.add_row(row["group"], row["strategy"], row["needs"], row["engines"])
    for server, cpus in placement.server_cpus.items():
        table.add_row(placement.server_actor(server), "-", cpus_text(cpus), f"(server {server})")
    return table


def engine_notes(plans: Iterable[InstanceEngines]) -> list[Text]:
    """The plan's explanations (defaults, quirks) and warnings (a user's value overridden)."""
    return [
        Text.assemble(
            (f"{note.level}: ", "yellow" if note.level == "warning" else "cyan"),
            f"{plan.instance}: {note.text}",
        )
        for plan in plans
        for note in plan.notes
    ]


def ready_table(
    plan: StackPlan,
    servers: Iterable[Mapping[str, Any]],
    ready_s: Mapping[str, float],
    engines: Iterable[Mapping[str, Any]] = (),
) -> Table:
    """The running stack: where each server listens, its pid, and how long it took to be ready."""
    table = Table(title="stack ready", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("kind")
    table.add_column("implementation")
    table.add_column("URL", no_wrap=True)
    table.add_column("pid", justify="right")
    on_ray = plan.placement is not None
    if on_ray:
        table.add_column("node address, id / Ray actor")
    table.add_column("ready (s)", justify="right")
    head = plan.head
    where = ["(driver)"] if on_ray else []
    table.add_row(
        head.name, head.kind, "-", head.url, str(os.getpid()), *where, _seconds(ready_s.get(head.name))
    )
    for engine in engines:
        table.add_row(
            str(engine["name"]), "engine", "vllm", str(engine["url"]), str(engine["pid"]),
            *([_where(engine)] if on_ray else []), _seconds(ready_s.get(str(engine["name"]))),
        )  # fmt: skip
    for server in servers:
        table.add_row(
            server["name"], server["kind"], server["implementation"], server["url"], str(server["pid"]),
            *([_where(server)] if on_ray else []), _seconds(ready_s.get(server["name"])),
        )  # fmt: skip
    return table


_SHORT_NODE_ID = 8
"""Hex digits of a Ray node id shown in tables (`ray list nodes` shows all 56; messages too)."""


def _where(entry: Mapping[str, Any]) -> str:
    """`10.0.0.3 node 5c1e2a9b ng-ab12-policy-engine-0`, or the local node's name for a plain
    child. The node id tells apart nodes that share an address (several raylets on one host)."""
    actor = entry.get("actor")
    node = str(entry.get("node") or "-")
    if not actor:
        return f"{node} (local process)"
    node_id = str(entry.get("node_id") or "")
    return f"{node} node {node_id[:_SHORT_NODE_ID]} {actor}" if node_id else f"{node} {actor}"


def status_table(head_url: str, servers: Iterable[Mapping[str, Any]], up: Mapping[str, bool]) -> Table:
    """`ng_status`: each server up or down, with its URL and pid."""
    table = Table(title=f"stack at {head_url}", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("kind")
    table.add_column("implementation")
    table.add_column("URL", no_wrap=True)
    table.add_column("pid", justify="right")
    table.add_column("node address, id / Ray actor")
    table.add_column("status")
    for server in servers:
        state = "[green]up[/green]" if up.get(server["name"]) else "[red]down[/red]"
        kind = str(server.get("kind") or server.get("server_type", "-"))
        table.add_row(
            str(server["name"]),
            kind,
            str(server.get("implementation", "-")),
            str(server["url"]),
            str(server.get("pid", "-")),
            _where(server),
            state,
        )
    return table


def suites_table(results: Iterable[SuiteResult]) -> Table:
    """`ng_test_all`: one row per server folder."""
    table = Table(title="server test suites", title_justify="left")
    table.add_column("server folder", no_wrap=True)
    table.add_column("result")
    table.add_column("time (s)", justify="right")
    for result in results:
        colour = "green" if result.exit_code == 0 else "yellow" if result.passed else "red"
        table.add_row(
            display_path(result.folder), f"[{colour}]{result.status}[/{colour}]", _seconds(result.duration_s)
        )
    return table


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
