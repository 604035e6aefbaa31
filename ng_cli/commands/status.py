"""`ng_status`: ask a running stack's head server which servers are up, and probe each one."""

from __future__ import annotations

from typing import Annotated

import typer

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    composed_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.errors import UpstreamHTTPError
from ng_cli.head import fetch_engines, fetch_servers
from ng_cli.launcher.health import probe_all
from ng_cli.launcher.plan import head_url_from_config, read_seconds
from ng_cli.launcher.render import status_table

__all__ = ["app", "main", "status"]

_EPILOG = """\b
Config keys this command reads:
  head_server_url   the head server to ask (default: from head_server, else http://127.0.0.1:11000)
  head_server       {host, port} of the head server, as ng_run was given it
  probe_timeout_s   seconds each /health probe may take (default 2)
Exit codes: 0 every server is up, 1 a server is down or the head server is unreachable.
Example:
  ng_status +head_server_url=http://127.0.0.1:11000"""

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
    with composed_config(overrides, config, verbose=verbose) as composed:
        head_url = head_url_from_config(composed)
        timeout_s = read_seconds(composed, "probe_timeout_s", 2.0)
        servers = fetch_servers(head_url, timeout_s=timeout_s)
        try:
            engines = fetch_engines(head_url, timeout_s=timeout_s)
        except UpstreamHTTPError:  # a head server from before /engines
            engines = []
        servers += [_engine_entry(engine) for engine in engines]
        up = probe_all({entry["name"]: entry["url"] for entry in servers}, timeout_s=timeout_s)
        make_console().print(status_table(head_url, servers, up))
    raise typer.Exit(0 if all(up.values()) else 1)


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
