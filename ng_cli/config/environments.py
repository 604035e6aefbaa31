"""NeMo Gym's `environment_servers:` instances: relays started as the agent they name, or refused.

NeMo Gym 0.7.0 pairs every environment config's agent with an environment server:

    example_environment_server:
      environment_servers:
        legacy_agent:                  # relays /run to the agent, translating nothing
          entrypoint: app.py
          agent_server: {type: responses_api_agents, name: example_simple_agent}

Here agents serve `/run` themselves, so a `legacy_agent` relay is its agent: the stack starts the
agent, and the head server lists the relay's name with the agent's URL, so collecting by
either name works. Other environment servers (`single_agent_turn_legacy`, ...) would need code
we do not have; they are refused with a message naming them, never dropped unsaid.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ng_cli.config.instances import ServerInstance
from ng_cli.config.sources import Sources, join_key
from ng_cli.errors import ConfigError

__all__ = ["ENVIRONMENT_SERVERS", "EnvironmentRelay", "find_environment_relays"]

ENVIRONMENT_SERVERS = "environment_servers"
RELAY_IMPLEMENTATION = "legacy_agent"
_AGENTS = "responses_api_agents"
_RELAY_KEYS = frozenset(
    {
        "entrypoint",
        "host",
        "port",
        "num_workers",
        "agent_server",
        # NeMo Gym's relay enforces none of these either; the agent keeps its own limits.
        "max_concurrent_episodes",
        "queue_timeout_seconds",
        "default_episode_timeout_seconds",
        "cleanup_timeout_seconds",
    }
)


@dataclass(frozen=True)
class EnvironmentRelay:
    """A `legacy_agent` environment server: another name for the agent it relays to."""

    name: str
    agent: str
    source: str | None


def find_environment_relays(
    tree: Mapping[str, Any], sources: Sources, instances: Mapping[str, ServerInstance]
) -> dict[str, EnvironmentRelay]:
    """Every `environment_servers` instance as a relay; all problems in one ConfigError."""
    relays: dict[str, EnvironmentRelay] = {}
    problems: list[str] = []
    for name, value in tree.items():
        if isinstance(value, dict) and ENVIRONMENT_SERVERS in value:
            relay = _relay(str(name), value, sources, instances, problems)
            if relay is not None:
                relays[relay.name] = relay
    if len(problems) == 1:
        raise ConfigError(problems[0], hint=_HINT)
    if problems:
        listing = "\n".join(f"  {problem}" for problem in problems)
        raise ConfigError(f"{len(problems)} problems with environment servers:\n{listing}", hint=_HINT)
    return relays


_HINT = (
    "an environment server here is legacy_agent: {agent_server: {type: responses_api_agents, "
    "name: <an agent instance>}}; it is served by that agent"
)


def _relay(
    name: str,
    value: dict[str, Any],
    sources: Sources,
    instances: Mapping[str, ServerInstance],
    problems: list[str],
) -> EnvironmentRelay | None:
    type_key = join_key(name, ENVIRONMENT_SERVERS)
    implementations = value[ENVIRONMENT_SERVERS]
    if len(value) != 1 or not isinstance(implementations, dict) or len(implementations) != 1:
        problems.append(
            f"{_at(sources, type_key)}{type_key}: expected exactly one environment server implementation"
        )
        return None
    implementation, block = next(iter(implementations.items()))
    key = join_key(type_key, implementation)
    if implementation != RELAY_IMPLEMENTATION:
        problems.append(
            f"{_at(sources, key)}{key}: environment server '{implementation}' cannot be started here "
            f"(only {RELAY_IMPLEMENTATION}, which relays /run to an agent, is supported)"
        )
        return None
    if not isinstance(block, dict):
        problems.append(f"{_at(sources, key)}{key}: expected a mapping, got {type(block).__name__}")
        return None
    for unknown in sorted(str(k) for k in block if k not in _RELAY_KEYS):
        problems.append(
            f"{_at(sources, join_key(key, unknown))}{join_key(key, unknown)}: unknown key '{unknown}'"
        )
    agent = _agent_name(
        block.get("agent_server"), join_key(key, "agent_server"), sources, instances, problems
    )
    return EnvironmentRelay(name, agent, sources.first(name)) if agent is not None else None


def _agent_name(
    ref: Any, key: str, sources: Sources, instances: Mapping[str, ServerInstance], problems: list[str]
) -> str | None:
    where = _at(sources, key)
    if not isinstance(ref, dict) or ref.get("type") != _AGENTS or not isinstance(ref.get("name"), str):
        problems.append(f"{where}{key}: expected {{type: {_AGENTS}, name: <agent instance>}}, got {ref!r}")
        return None
    name = ref["name"]
    target = instances.get(name)
    if target is not None and target.server_type == _AGENTS:
        return str(name)
    agents = [n for n, instance in instances.items() if instance.server_type == _AGENTS]
    close = difflib.get_close_matches(name, agents, n=1)
    known = f"did you mean '{close[0]}'?" if close else f"agents: {', '.join(agents) or 'none'}"
    problems.append(f"{_at(sources, join_key(key, 'name'))}{key}: no agent instance named '{name}'; {known}")
    return None


def _at(sources: Sources, key: str) -> str:
    origin = sources.lookup(key)
    return f"{origin}  " if origin else ""
