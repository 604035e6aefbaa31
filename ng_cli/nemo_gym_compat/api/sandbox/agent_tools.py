"""`nemo_gym.sandbox.agent_tools`: helpers NeMo Gym's sandboxed agents share.

`verify_agent_response` (a run whose agent failed is verified as an empty answer, which must
score an unmasked 0, then keeps the real answer for inspection) and `sandbox_server_url` (a
stack server's URL as code in a sandbox reaches it). NeMo Gym's MCP seeding and network
policies for remote sandboxes are not stood in for: those sandboxes are refused here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ng_cli.nemo_gym_compat.api.base_resources_server import BaseRunRequest
from ng_cli.nemo_gym_compat.api.config_types import ResourcesServerRef
from ng_cli.nemo_gym_compat.api.failure_kinds import AGENT_RUN_ERROR
from ng_cli.nemo_gym_compat.api.openai_utils import NeMoGymResponse
from ng_cli.nemo_gym_compat.api.server_utils import (
    ServerClient,
    get_response_json,
    get_server_url,
    raise_for_status,
)

__all__ = ["sandbox_server_url", "verify_agent_response"]


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
