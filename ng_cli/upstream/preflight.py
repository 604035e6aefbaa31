"""Start-up checks of a model server's upstream endpoints: reachable, key accepted, model served.

A wrong key or a wrong model name is a config mistake that no retry fixes, so it stops the
server with a message that names the endpoint and what it does serve (the key is never shown).
An unreachable endpoint is not fatal while another one works: it starts out of the pool and the
health prober readmits it when it comes up. With none reachable the server does not start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ng_cli.errors import ConfigError, InvalidOutputError, LaunchError, NgError, UpstreamHTTPError
from ng_cli.servers.http import HttpClient, Timeouts
from ng_cli.upstream.pool import Endpoint, EndpointPool

__all__ = ["EndpointCheck", "check_endpoints"]

logger = logging.getLogger("ng_cli.upstream")

_RETRY_EVERY_S = 1.0


@dataclass(frozen=True)
class EndpointCheck:
    """What one endpoint's `GET <base_url>/models` told us."""

    endpoint: Endpoint
    served: tuple[str, ...] = ()
    unreachable: str | None = None
    """Why the endpoint could not be asked (connection refused, timeout, 5xx); None if it answered."""


async def check_endpoints(
    http: HttpClient,
    pool: EndpointPool,
    *,
    server: str,
    model: str,
    headers: Callable[[Endpoint], Mapping[str, str]],
    timeouts: Timeouts,
    wait_s: float = 0.0,
    require_model: bool = True,
) -> list[EndpointCheck]:
    """Check every endpoint; mark unreachable ones down; raise ConfigError/LaunchError when unusable."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        checks = await asyncio.gather(
            *(_check(http, e, headers(e), timeouts, server) for e in pool.endpoints)
        )
        if any(check.unreachable is None for check in checks) or loop.time() >= deadline:
            break
        await asyncio.sleep(min(_RETRY_EVERY_S, max(0.0, deadline - loop.time())))
    reachable = [check for check in checks if check.unreachable is None]
    if not reachable:
        details = "; ".join(f"{c.endpoint.base_url}: {c.unreachable}" for c in checks)
        first = pool.endpoints[0].base_url
        raise LaunchError(
            f"'{server}': no upstream endpoint is reachable ({details})",
            hint=f"start the model server first and check it with: curl {first}/models"
            + ("" if wait_s else "; or set startup_wait_s to wait for it"),
        )
    if require_model:
        for check in reachable:
            _require_model(check, model, server)
    for check in checks:
        if check.unreachable is not None:
            pool.record_failure(check.endpoint, f"unreachable at start: {check.unreachable}", now=loop.time())
            logger.warning(
                "'%s': endpoint %s is unreachable at start (%s); it joins when its health probe passes",
                server,
                check.endpoint.base_url,
                check.unreachable,
            )
    return checks


async def _check(
    http: HttpClient, endpoint: Endpoint, headers: Mapping[str, str], timeouts: Timeouts, server: str
) -> EndpointCheck:
    url = f"{endpoint.base_url}/models"
    try:
        body = await http.get_json(url, headers=headers, timeouts=timeouts)
    except UpstreamHTTPError as error:
        if error.status in (401, 403):
            rejected = (
                "the user:password of its URL"
                if headers.get("Authorization", "").startswith("Basic ")
                else "the configured api_key"
            )
            raise ConfigError(
                f"'{server}': {url} answered HTTP {error.status}: {rejected} was rejected",
                hint="set api_key to the key the model server was started with (vLLM: --api-key); "
                "in env.yaml that is policy_api_key",
            ) from None
        if error.status >= 500:
            return EndpointCheck(endpoint, unreachable=f"HTTP {error.status}")
        raise ConfigError(
            f"'{server}': {url} answered HTTP {error.status}; is base_url the server's OpenAI API root?",
            hint=f"check it with: curl {url}",
        ) from None
    except InvalidOutputError:
        raise ConfigError(
            f"'{server}': {url} answered with something that is not JSON; "
            "is base_url an OpenAI-compatible API root?",
            hint=f"check it with: curl {url}",
        ) from None
    except NgError as error:
        return EndpointCheck(endpoint, unreachable=error.message)
    return EndpointCheck(endpoint, served=_served_models(body, url, server))


def _served_models(body: Any, url: str, server: str) -> tuple[str, ...]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ConfigError(
            f"'{server}': {url} did not answer with a model list ({{'data': [...]}}); "
            "is base_url an OpenAI-compatible API root?"
        )
    return tuple(str(entry["id"]) for entry in data if isinstance(entry, dict) and "id" in entry)


def _require_model(check: EndpointCheck, model: str, server: str) -> None:
    if model in check.served:
        return
    served = ", ".join(repr(name) for name in check.served) or "no models"
    raise ConfigError(
        f"'{server}': {check.endpoint.base_url} does not serve model {model!r}; it serves {served}",
        hint="set model (policy_model_name in env.yaml) to the served name exactly, "
        "or start vLLM with --served-model-name " + repr(model),
    )
