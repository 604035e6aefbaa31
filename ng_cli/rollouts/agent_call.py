"""One attempt of one rollout: `POST <agent>/run` under the rollout's deadline.

The collector's per-row call, shared with NeMo Gym's `run_examples` (`ng_cli.trainer_api`): the
deadline cuts a hung agent call (a typed `UpstreamTimeoutError` naming `rollout_timeout_s`), and
the agent gets the same deadline (`X-NG-Deadline-S`) to pass down every hop. Whether a failure is
tried again is the caller's decision (`rollouts.failures.classify`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ng_cli.errors import UpstreamTimeoutError
from ng_cli.servers.deadline import deadline_scope, remaining_s
from ng_cli.servers.http import HttpClient, Timeouts

__all__ = ["http_timeouts", "post_run"]

_DEADLINE_SLACK_S = 0.05
"""An HTTP timeout this close to the rollout deadline is the deadline (the two race)."""


def http_timeouts(rollout_timeout_s: float) -> Timeouts:
    """A little longer than the rollout deadline, so the deadline is what cuts a hung call."""
    return Timeouts(
        connect_s=min(10.0, rollout_timeout_s), read_s=rollout_timeout_s + 5, total_s=rollout_timeout_s + 5
    )


async def post_run(http: HttpClient, url: str, row: dict[str, Any], *, timeout_s: float) -> Any:
    """One POST /run under the rollout deadline; the agent's answer, or a typed UpstreamError."""
    expired = UpstreamTimeoutError(
        f"{url} did not finish the rollout within rollout_timeout_s={timeout_s:g}", endpoint=url
    )
    with deadline_scope(timeout_s):
        try:
            async with asyncio.timeout(timeout_s):
                return await http.post_json(url, row)
        except TimeoutError as exc:
            raise expired from exc
        except UpstreamTimeoutError as exc:
            left = remaining_s()
            if left is not None and left <= _DEADLINE_SLACK_S:  # the HTTP timeout was the deadline's
                raise expired from exc
            raise
