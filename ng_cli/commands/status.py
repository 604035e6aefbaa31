"""`ng_status`: ask a running stack's head server which servers are up, and probe each one."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from pydantic import Field

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    command_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.config.command_options import CommandOptions, options_help
from ng_cli.errors import NgError, UpstreamHTTPError
from ng_cli.head import fetch_engines, fetch_servers
from ng_cli.launcher.health import probe_all
from ng_cli.launcher.plan import head_url_from_config
from ng_cli.launcher.render import status_table
from ng_cli.rollouts.config import STACK_FILE_COMMANDS
from ng_cli.training.client import WeightsClient

__all__ = ["OPTIONS", "StatusOptions", "app", "main", "status"]


class StatusOptions(CommandOptions):
    """Which running stack to ask, and how long each probe may take."""

    head_server_url: str | None = None
    """The head server to ask (default: from head_server, else http://127.0.0.1:11000)."""
    head_server: dict[str, Any] | None = None
    """{host, port} of the head server, as ng_run was given it."""
    probe_timeout_s: float = Field(default=2.0, gt=0)
    """Seconds each /health probe may take."""


OPTIONS = StatusOptions

_EPILOG = options_help(
    StatusOptions,
    docs="docs/running.md",
    notes="""A model server whose engines take weight updates gets a line with its weight version.
Exit codes: 0 every server is up, 1 a server is down, an engine is held out after a failed rollback, or the head server is unreachable, 2 bad options.
Example:
  ng_status +head_server_url=http://127.0.0.1:11000""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def status(
    overrides: Annotated[
        list[str] | None,
        overrides_argument("Hydra-style overrides, e.g. +head_server_url=http://127.0.0.1:11000"),
    ] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Print each server and engine of the running stack as up or down, with its URL, pid and node."""
    with command_config(
        overrides,
        StatusOptions,
        command="ng_status",
        verbose=verbose,
        config_files=config,
        shared=STACK_FILE_COMMANDS,
    ) as (options, composed):
        head_url = head_url_from_config(composed)
        timeout_s = options.probe_timeout_s
        servers = fetch_servers(head_url, timeout_s=timeout_s)
        try:
            engines = fetch_engines(head_url, timeout_s=timeout_s)
        except UpstreamHTTPError:  # a head server from before /engines
            engines = []
        engine_rows = [_engine_entry(engine) for engine in engines]
        servers += engine_rows
        up = probe_all({entry["name"]: entry["url"] for entry in servers}, timeout_s=timeout_s)
        console = make_console()
        console.print(status_table(head_url, servers, up))
        sound = True
        for entry in servers:
            if isinstance(entry.get("admin"), dict) and up.get(str(entry["name"])):
                line, weights_sound = _weights_line(head_url, entry, engine_rows)
                console.print(line, highlight=False)
                sound = sound and weights_sound
    raise typer.Exit(0 if all(up.values()) and sound else 1)


def _weights_line(
    head_url: str, entry: dict[str, Any], engines: list[dict[str, Any]] | None = None
) -> tuple[str, bool]:
    """`weights: policy_model version 3 (/ckpt/step-3), admitting, 12 calls in flight` (or why not
    read), a line per engine with its node and version, and whether the weights are sound (False:
    an engine is held out after a failed rollback, or lost with its node during an update)."""
    name = str(entry["name"])
    routes = f"admin routes {entry['url']}{entry['admin']['weights']}/..."
    try:
        status = WeightsClient.connect(head_url, model_server=name, timeout_s=5.0).status()
    except NgError as error:
        return (
            f"weights: {name} takes weight updates ({routes}); its version is not readable here: {error.message}",
            True,
        )
    running = status.get("running")
    if status.get("sleeping"):
        admitting = "NOT admitting (asleep: POST /admin/wake_up)"
    elif running:
        admitting = f"NOT admitting ({running['operation']} to version {running['version']}, phase {running['phase']})"
    else:
        admitting = "admitting" if status["admitting"] else "NOT admitting"
    line = (
        f"weights: {name} version {status['version']} ({status['path'] or 'pushed tensors'}), {admitting}, "
        f"{status['in_flight']} calls in flight; {routes}"
    )
    line += _engine_versions(status, engines or [])
    held_out = status.get("held_out") or {}
    for engine, reason in held_out.items():
        line += f"\n  HELD OUT {engine}: {reason} (out of the pool until it holds the current weights)"
    if held_out and not status.get("serving"):
        line += "\n  NO ENGINE SERVES: calls wait for the next update (upstream_down_grace_s bounds the wait)"
    return line, not held_out


def _engine_versions(status: dict[str, Any], engines: list[dict[str, Any]]) -> str:
    """`  policy_model/engine-0 on node 5c1e...e7 (10.0.0.3): version 3` per engine the model server
    lists (its node from the head's /engines; `not serving` while it is out of the pool)."""
    by_root = {str(engine["url"]).rstrip("/"): engine for engine in engines}
    lines = ""
    for root, version in (status.get("engine_versions") or {}).items():
        engine = by_root.get(str(root).rstrip("/"), {})
        where = f" on node {engine.get('node_id') or '?'} ({engine['node']})" if engine.get("node") else ""
        told = (
            f"version {version}"
            if version is not None
            else f"not serving (version {status['version']} when back)"
        )
        lines += f"\n  {engine.get('name', 'engine')} {root}{where}: {told}"
    return lines


def _engine_entry(engine: dict[str, object]) -> dict[str, object]:
    """An engine as a status row: its root URL (vLLM's /health is not under /v1)."""
    return {
        **engine,
        "kind": "engine",
        "implementation": "vllm",
        "url": str(engine["url"]).removesuffix("/v1"),
    }


def main() -> None:
    """Console-script entry point (`ng_status`)."""
    app()
