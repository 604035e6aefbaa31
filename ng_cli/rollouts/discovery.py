"""Finding the agents' URLs: `+agent_urls` first, then the head server's `GET /servers`.

`ng_run` starts the head server; it lists every server of the stack with its URL and whether it
is ready. An agent that is listed but not ready yet is waited for (up to `ready_timeout_s`), so
a script may start `ng_run` and the collector back to back. Every problem here happens before
any rollout starts. `listed_url` asks again during a run: an agent restarted on another Ray node
(its own node lost) listens at a new address, which the head lists.
"""

from __future__ import annotations

import asyncio
import difflib
import time
from collections.abc import Mapping
from typing import Any

from ng_cli.errors import ConfigError, DataError, UpstreamError
from ng_cli.rollouts.config import CollectConfig
from ng_cli.rollouts.inputs import AGENT_SERVER_TYPE, InputSummary
from ng_cli.servers.http import HttpClient, Timeouts

__all__ = ["find_agent_urls", "listed_url"]

_HEAD_TIMEOUTS = Timeouts(connect_s=3.0, read_s=10.0, total_s=15.0)
_POLL_S = 0.5


async def find_agent_urls(http: HttpClient, config: CollectConfig, summary: InputSummary) -> dict[str, str]:
    """Agent name -> base URL for every agent the input uses; unknown agents are errors."""
    urls = {name: config.agent_urls[name] for name in summary.agents if name in config.agent_urls}
    wanted = [name for name in summary.agents if name not in urls]
    if not wanted:
        return urls
    deadline = time.monotonic() + config.ready_timeout_s
    while True:
        servers = await _list_servers(http, config)
        _check_known(wanted, servers, config, summary)
        not_ready = [name for name in wanted if not servers[name].get("is_ready", True)]
        if not not_ready:
            return urls | {name: str(servers[name]["url"]).rstrip("/") for name in wanted}
        if time.monotonic() >= deadline:
            raise ConfigError(
                f"agent(s) {', '.join(not_ready)} did not become ready within {config.ready_timeout_s:g} s "
                f"(head server {config.head_server_url})",
                hint="check ng_run's output for a server that failed to start, or raise +ready_timeout_s",
            )
        await asyncio.sleep(_POLL_S)


async def listed_url(http: HttpClient, config: CollectConfig, name: str) -> str | None:
    """Where the head lists the server `name` now; None when the head cannot say."""
    try:
        servers = await _list_servers(http, config)
    except ConfigError:
        return None
    url = servers.get(name, {}).get("url")
    return str(url).rstrip("/") if url else None


async def _list_servers(http: HttpClient, config: CollectConfig) -> dict[str, Mapping[str, Any]]:
    url = f"{config.head_server_url}/servers"
    try:
        listed = await http.get_json(url, timeouts=_HEAD_TIMEOUTS)
    except UpstreamError as exc:
        raise ConfigError(
            f"cannot list the stack's servers from the head server at {config.head_server_url}: {exc}",
            hint="start the stack first (ng_run +config_paths=[...]), pass +head_server_url=http://host:port, "
            "or give agent URLs directly with +agent_urls.<agent_name>=http://host:port",
        ) from exc
    if not isinstance(listed, list):
        raise ConfigError(f"{url} answered {type(listed).__name__}, expected a list of servers")
    return {str(entry["name"]): entry for entry in listed if isinstance(entry, dict) and "name" in entry}


def _check_known(
    wanted: list[str], servers: Mapping[str, Mapping[str, Any]], config: CollectConfig, summary: InputSummary
) -> None:
    agents = sorted(name for name, entry in servers.items() if _serves_run(entry))
    for name in wanted:
        entry = servers.get(name)
        if entry is not None and _serves_run(entry):
            continue
        what = "is not part of the stack" if entry is None else f"is a {entry.get('server_type')} server"
        close = difflib.get_close_matches(name, agents, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        hint += f"agents in the stack: {', '.join(agents) or 'none'}"
        if config.agent_name is not None:
            raise ConfigError(f"+agent_name={name}: '{name}' {what} ({config.head_server_url})", hint=hint)
        line = summary.first_line_of_agent[name]
        raise DataError(f"{summary.path}:{line}: unknown agent '{name}': it {what}", hint=hint)


def _serves_run(entry: Mapping[str, Any]) -> bool:
    """An agent, or a NeMo Gym environment server relayed to one (its URL is the agent's)."""
    return entry.get("server_type") == AGENT_SERVER_TYPE or bool(entry.get("relays_to"))
