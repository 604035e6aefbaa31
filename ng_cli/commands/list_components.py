"""NeMo Gym's `gym list environments|agents|models|resources-servers` and `gym search`: its components by name.

    gym list environments [NAME] [--kind K] [--domain D] [--json]   -> ng list_environments ...
    gym list agents|models|resources-servers [NAME] [--json]        -> ng list_agents ... (and so on)
    gym search [environments|benchmarks|agents|models|resources-servers] QUERY [--json]

The same names, JSON and messages as NeMo Gym 0.7.0 (`nemo_gym/cli/env.py` `list_environments`,
`cli/agents.py`, `cli/models.py`, `cli/resources_servers.py`, `cli/main.py` `_search`), found in
the same places (`ng_cli/datasets/workloads.py`, `components.py`). One module, one entry point:
the name it is called by (`ng_list_agents`, ...) says which listing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import typer

from ng_cli.commands._app import Verbose, make_app, overrides_argument, read_options, reported_errors
from ng_cli.commands._listing import ListOptions, inspection, nothing_found, print_json, print_table, unknown
from ng_cli.config.command_options import options_help
from ng_cli.datasets.components import discover_agents, discover_models, discover_resources_servers
from ng_cli.datasets.discovery import fuzzy_matches, read_yaml, search_roots, server_configs
from ng_cli.datasets.workloads import (
    Kind,
    Workload,
    benchmark_data,
    discover_workloads,
    select,
    workload_details,
)
from ng_cli.errors import ConfigError

__all__ = ["APPS", "CatalogOptions", "EnvironmentsOptions", "SearchOptions", "main", "show_catalog"]

M = TypeVar("M", bound=ListOptions)
_NOTES = "Looks in $NEMO_GYM_EXTRA_ROOTS, the current directory, then this repo. Exit codes: 0, 2 bad options or an unknown name."


class CatalogOptions(ListOptions):
    """Which environments and benchmarks, and how to print them."""

    domain: str | None = None
    """Only those of this domain (math, coding, agent, ...)."""
    modality: str | None = None
    """Only those of this modality (from their manifest)."""
    licensing: str | None = None
    """Only those under this license (from their manifest)."""
    status: Literal["experimental", "no-manifest"] | None = None
    """Only experimental ones, or those without a manifest."""
    lifecycle: Literal["active", "deprecated"] | None = None
    """Only active or deprecated ones (from their manifest)."""


class EnvironmentsOptions(CatalogOptions):
    """Which environments and benchmarks, and how to print them."""

    catalog_kind: Kind | None = None
    """Only environments, or only benchmarks (NeMo Gym's --kind)."""


class SearchOptions(ListOptions):
    """What to search, and for what."""

    component_type: Literal["environments", "benchmarks", "agents", "models", "resources-servers"] | None = (
        None
    )
    """What to search (default: environments and benchmarks)."""


def show_catalog(options: CatalogOptions, *, kind: Kind | None, data: bool = False) -> None:
    """The environments and benchmarks (of `kind`); `data`: with each benchmark's dataset and
    whether its file is here (ng_list_benchmarks)."""
    roots = search_roots()
    entries = discover_workloads(roots)
    if options.component_name:
        _inspect_workload(options.component_name, entries, kind, options.json_format, roots, data=data)
        return
    filters = {
        key: getattr(options, key, None) for key in ("domain", "modality", "licensing", "status", "lifecycle")
    }
    selected, warnings = select(entries, query=options.query, filters=filters | {"catalog_kind": kind})
    for warning in warnings:
        typer.echo(warning, err=True)
    if options.json_format:
        print_json([entry.payload() | (_data_payload(entry, roots) if data else {}) for entry in selected])
    elif data:
        _benchmarks_table(
            selected, roots, any_at_all=any(e.kind == "benchmark" for e in entries), query=options.query
        )
    elif not selected:
        nothing_found("environments", options.query)
    else:
        manifests = sum(entry.manifest is not None for entry in entries)
        counts = f"{len(selected)}; manifests {manifests}/{len(entries)}"
        title = (
            f"Catalog entries matching '{options.query}' ({counts})"
            if options.query
            else f"Environments and benchmarks ({counts})"
        )
        rows = [
            (e.name, e.kind, e.status or "", e.lifecycle or "", e.domain or "", e.description or "")
            for e in selected
        ]
        print_table(title, ("Name", "Kind", "Status", "Lifecycle", "Domain", "Description"), rows)


def _data_payload(entry: Workload, roots: list[Path]) -> dict[str, object]:
    found = benchmark_data(entry, roots)
    return {
        "config": entry.config.relative_to(entry.root).as_posix(),
        "agent": found.agent,
        "num_repeats": found.num_repeats,
        "jsonl_fpath": found.jsonl_fpath,
        "has_data": found.has_data,
        "prepare_script": found.prepare_script,
    }


def _benchmarks_table(
    selected: list[Workload], roots: list[Path], *, any_at_all: bool, query: str | None
) -> None:
    if not any_at_all:
        typer.echo(
            f"No benchmarks found (benchmarks/ under {', '.join(map(str, roots))}).\n"
            "ng_cli ships no benchmark. Run this from NeMo Gym's root to list its benchmarks; their data "
            "comes from Hugging Face through NeMo Gym's prepare scripts (not offered here: see ng_prepare_benchmark)."
        )
        return
    if not selected:
        nothing_found("benchmarks", query)
        return
    rows = []
    missing = 0
    for entry in selected:
        found = benchmark_data(entry, roots)
        missing += not found.has_data
        repeats = str(found.num_repeats or "")
        config = entry.config.relative_to(entry.root).as_posix()
        rows.append(
            (entry.name, "present" if found.has_data else "missing", repeats, entry.domain or "", config)
        )
    title = f"Benchmarks matching '{query}' ({len(rows)})" if query else f"Benchmarks ({len(rows)})"
    print_table(title, ("Name", "Data", "Repeats", "Domain", "Config"), rows)
    if missing:
        typer.echo(f"{missing} without data: NeMo Gym's prepare scripts download it (not offered here).")


def _inspect_workload(
    name: str, entries: list[Workload], kind: Kind | None, json_output: bool, roots: list[Path], *, data: bool
) -> None:
    matching = [entry for entry in entries if entry.name == name and (kind is None or entry.kind == kind)]
    if not matching:
        known = next((entry for entry in entries if entry.name == name), None)
        if known is not None:
            article = "an" if known.kind.startswith(("a", "e", "i", "o", "u")) else "a"
            raise ConfigError(
                f"'{name}' is {article} {known.kind}, not a {kind}. Try `gym list {known.kind}s {name}`."
            )
        raise unknown(
            name, [e.name for e in entries if kind is None or e.kind == kind], kind or "environment"
        )
    if len(matching) > 1:
        kinds = ", ".join(sorted(entry.kind for entry in matching))
        raise ConfigError(
            f"Catalog name '{name}' is ambiguous ({kinds}); specify a kind.", hint="+catalog_kind=benchmark"
        )
    entry = matching[0]
    domain, description, details = workload_details(entry, roots)
    if data:
        found = benchmark_data(entry, roots)
        present = "present" if found.has_data else "missing"
        details |= {"data": f"{found.jsonl_fpath} ({present})"} if found.jsonl_fpath else {}
    selector = entry.resources_server_selector
    usage = (
        f"gym env start --resources-server {selector} --model-type vllm_model"
        if selector
        else f"gym env start --{entry.kind} {name} --model-type vllm_model"
    )
    inspection(
        json_output=json_output,
        name=name,
        noun=entry.kind,
        domain=domain,
        description=description,
        details=details,
        usage=usage,
    )


def show_agents(options: ListOptions) -> None:
    agents = discover_agents(search_roots())
    if options.component_name:
        agent = agents.get(options.component_name)
        if agent is None:
            raise unknown(options.component_name, agents, "agent")
        details = {
            "path": str(agent.path.resolve()),
            "composition": "self-contained (B)" if agent.self_contained else "composable (A)",
        }
        details |= {"variants": ", ".join(agent.variants)} if agent.variants else {}
        inspection(
            json_output=options.json_format,
            name=agent.name,
            noun="agent",
            description=agent.description,
            details=details,
        )
        return
    query = options.query
    selected = [
        a
        for a in agents.values()
        if not query or fuzzy_matches(query, a.name, a.description or "", *a.variants)
    ]
    if options.json_format:
        print_json([agent.payload() for agent in selected])
    elif not selected:
        nothing_found("agents", query)
    else:
        rows = [
            (
                a.name,
                "self-contained (B)" if a.self_contained else "composable (A)",
                ", ".join(a.variants) or "—",
                a.description or "",
            )
            for a in selected
        ]
        print_table(
            f"Agents matching '{query}'" if query else "Agents",
            ("agent", "composition", "variants", "description"),
            rows,
        )


def show_models(options: ListOptions) -> None:
    models = discover_models(search_roots())
    if options.component_name:
        model = models.get(options.component_name)
        if model is None:
            raise unknown(options.component_name, models, "model")
        usage = f"gym env start --resources-server example_single_tool_call --model-type {model.name}"
        inspection(
            json_output=options.json_format,
            name=model.name,
            noun="model",
            details={"config": str(model.config.resolve())},
            usage=usage,
        )
        return
    query = options.query
    selected = [m for m in models.values() if not query or fuzzy_matches(query, m.name, m.group)]
    if options.json_format:
        print_json([model.payload() for model in selected])
    elif not selected:
        nothing_found("models", query)
    else:
        rows = [(model.name, model.group) for model in selected]
        print_table(f"Models matching '{query}'" if query else "Models", ("Model", "Model group"), rows)


def show_resources_servers(options: ListOptions) -> None:
    servers = discover_resources_servers(search_roots())
    if options.component_name:
        server = servers.get(options.component_name)
        if server is None:
            raise unknown(options.component_name, servers, "resources server")
        value = next(
            (
                str(b["value"])
                for g, _n, b in server_configs(read_yaml(server.config))
                if g == "resources_servers" and b.get("value")
            ),
            None,
        )
        description = server.description
        if value:
            description = f"{description}\nValue: {value}" if description else f"Value: {value}"
        inspection(
            json_output=options.json_format,
            name=server.name,
            noun="resources server",
            domain=server.domain,
            description=description,
            details={"config": str(server.config.resolve())},
            usage=f"gym env start --resources-server {server.name} --model-type vllm_model",
        )
        return
    query = options.query
    selected = [
        s
        for s in servers.values()
        if not query or fuzzy_matches(query, s.name, s.domain or "", s.description or "")
    ]
    if options.json_format:
        print_json([server.payload() for server in selected])
    elif not selected:
        nothing_found("resources servers", query)
    else:
        counts = f"({len(selected)})"
        title = f"Resources servers matching '{query}' {counts}" if query else f"Resources servers {counts}"
        print_table(
            title,
            ("Name", "Domain", "Description"),
            [(s.name, s.domain or "", s.description or "") for s in selected],
        )


def search(options: SearchOptions) -> None:
    """`gym search [TYPE] QUERY`: the listing of that type (default: the catalog), narrowed to the query."""
    if not options.query:
        raise ConfigError("gym search needs a query", hint="gym search math (or: ng search +query=math)")
    kind = options.component_type
    if kind in (None, "environments", "benchmarks"):
        catalog_kind: Kind | None = "environment" if kind == "environments" else "benchmark" if kind else None
        show_catalog(EnvironmentsOptions(json=options.json_format, query=options.query), kind=catalog_kind)
        return
    listing = {"agents": show_agents, "models": show_models, "resources-servers": show_resources_servers}[
        kind
    ]
    listing(ListOptions(json=options.json_format, query=options.query))


def _environments(options: EnvironmentsOptions) -> None:
    show_catalog(options, kind=options.catalog_kind)


def _command(name: str, model: type[M], show: Callable[[M], None], summary: str) -> typer.Typer:
    app = make_app(help=summary)

    @app.command(name=name, help=summary, epilog=options_help(model, docs="docs/umbrella.md", notes=_NOTES))
    def run(
        overrides: Annotated[list[str] | None, overrides_argument("+json=true")] = None,
        verbose: Verbose = False,
    ) -> None:
        options = read_options(overrides, model, command=f"ng_{name}", verbose=verbose)
        with reported_errors(verbose=verbose):
            show(options)

    return app


APPS: dict[str, typer.Typer] = {
    "list_environments": _command(
        "list_environments",
        EnvironmentsOptions,
        _environments,
        "List or inspect the environments and benchmarks.",
    ),
    "list_agents": _command("list_agents", ListOptions, show_agents, "List or inspect the agents."),
    "list_models": _command("list_models", ListOptions, show_models, "List or inspect the model servers."),
    "list_resources_servers": _command(
        "list_resources_servers",
        ListOptions,
        show_resources_servers,
        "List or inspect the resources servers.",
    ),
    "search": _command(
        "search", SearchOptions, search, "Search the environments, benchmarks or other components."
    ),
}
"""Our command (without `ng_`) -> its app."""


def main() -> None:
    """Entry point of every listing here (the name it is called by, `ng_<command>`, says which)."""
    name = Path(sys.argv[0]).name.removeprefix("nemo_gym_").removeprefix("ng_")
    APPS[name]()
