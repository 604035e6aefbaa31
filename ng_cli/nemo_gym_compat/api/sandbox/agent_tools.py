"""`nemo_gym.sandbox.agent_tools`: helpers NeMo Gym's sandboxed agents share.

`verify_agent_response` (a run whose agent failed is verified as an empty answer, which must
score an unmasked 0, then keeps the real answer for inspection), `sandbox_server_url` (a
stack server's URL as code in a sandbox reaches it), `seed_mcp_servers` (each tool server
seeded for the rollout, its MCP route and per-session headers for the sandboxed agent) and
`restricted_network_policy`, NeMo Gym's own: it fails closed for every provider but
OpenSandbox's (which is refused here), so an agent asking for restricted network access is
refused rather than given an open network.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ng_cli.nemo_gym_compat.api.base_resources_server import NEMO_GYM_MCP_METADATA_KEY, BaseRunRequest
from ng_cli.nemo_gym_compat.api.config_types import ResourcesServerRef
from ng_cli.nemo_gym_compat.api.failure_kinds import AGENT_RUN_ERROR
from ng_cli.nemo_gym_compat.api.openai_utils import NeMoGymResponse
from ng_cli.nemo_gym_compat.api.server_utils import (
    ServerClient,
    get_response_json,
    get_server_url,
    raise_for_status,
)

__all__ = ["restricted_network_policy", "sandbox_server_url", "seed_mcp_servers", "verify_agent_response"]


def sandbox_server_url(name: str, *, require_reachable: bool = False) -> str:
    """The server's URL, a wildcard bind address given as loopback. A remote sandbox
    (`require_reachable`) cannot be had here, so asking for one is refused."""
    if require_reachable:
        raise ValueError("a remote sandbox's reachable URL was asked for; only the local sandbox runs here")
    base = get_server_url(name).rstrip("/")
    parts = urlsplit(base)
    if parts.hostname in {"0.0.0.0", "::"}:
        host = "[::1]" if parts.hostname == "::" else "127.0.0.1"
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return base


def _reachable_host(url: str) -> str:
    target = urlsplit(url).hostname
    try:
        address = ipaddress.ip_address(target) if target else None
    except ValueError:
        address = None
    if (
        not target
        or target.lower().rstrip(".") == "localhost"
        or (address is not None and (address.is_loopback or address.is_unspecified))
    ):
        raise ValueError(
            "Model/tool endpoint must advertise a sandbox-reachable host. Set use_absolute_ip=true "
            "or bind the server to an explicitly reachable host; rewriting a loopback URL is insufficient."
        )
    return target


def restricted_network_policy(provider_name: str, urls: list[str]) -> dict[str, object]:
    """NeMo Gym's egress policy (deny all but these hosts); only OpenSandbox can enforce one, so
    any other provider is refused (fail closed), as in NeMo Gym."""
    if provider_name != "opensandbox":
        raise ValueError("Restricted network access requires the OpenSandbox network-policy provider")
    targets = sorted({_reachable_host(url) for url in urls})
    return {"defaultAction": "deny", "egress": [{"action": "allow", "target": t} for t in targets]}


async def seed_mcp_servers(
    client: ServerClient,
    servers: list[ResourcesServerRef],
    body: BaseRunRequest,
    cookies: Mapping[str, str],
    *,
    timeout_s: float,
    require_reachable: bool = False,
) -> dict[str, dict[str, object]]:
    """Seed each tool server for this rollout; the sandboxed agent gets its MCP URL and the
    per-session headers its `/seed_session` answered (a server without them is refused)."""
    entries: dict[str, dict[str, object]] = {}
    for server in servers:
        seeded = await client.post(
            server_name=server.name, url_path="/seed_session", json=body.model_dump(), cookies=cookies
        )
        await raise_for_status(seeded)
        metadata = (await get_response_json(seeded)).get(NEMO_GYM_MCP_METADATA_KEY)
        if not isinstance(metadata, dict) or not metadata.get("headers"):
            raise ValueError(f"Tool server {server.name} must expose authenticated MCP tools")
        url_path = str(metadata.get("url_path", "/mcp")).lstrip("/")
        entries[server.name] = {
            "url": f"{sandbox_server_url(server.name, require_reachable=require_reachable)}/{url_path}",
            "headers": metadata["headers"],
            "enabled": True,
            "timeout": int(timeout_s * 1000),
        }
    return entries


async def verify_agent_response(
    client: ServerClient,
    server: ResourcesServerRef,
    body: BaseRunRequest,
    response: NeMoGymResponse,
    cookies: Mapping[str, str],
    *,
    force_zero_reward: bool,
) -> dict[str, Any]:
    """`/verify` of `response` (of an empty one with `force_zero_reward`, which must score an
    unmasked 0; the real response is then kept in the result, marked as the agent's failure)."""
    grading = response.model_copy(update={"output": []}) if force_zero_reward else response
    verified = await client.post(
        server_name=server.name,
        url_path="/verify",
        cookies=cookies,
        json=body.model_dump(mode="json") | {"response": grading.model_dump(mode="json")},
    )
    await raise_for_status(verified)
    result: dict[str, Any] = await get_response_json(verified)
    if force_zero_reward:
        if result.get("reward") != 0 or result.get("mask_sample", False):
            raise ValueError(
                "execution_failure_reward_zero requires a verifier that scores an empty response as unmasked zero"
            )
        result.update(
            response=response.model_dump(mode="json"),
            failure_kind=AGENT_RUN_ERROR,
            failure_reason="Agent execution failed; execution_failure_reward_zero applied via empty-response verification.",
        )
    return result
