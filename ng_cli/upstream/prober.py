"""`HealthProber`: one background task per endpoint that probes its health and readmits it.

A healthy endpoint is probed every `interval_s`; a failed probe takes it out of the pool, unless
the endpoint answered calls while the probe waited (busy, not down: see `check`). A down
endpoint is probed as soon as its cool-down ends (see `EndpointPool`), so a restarted vLLM
rejoins within a fraction of a second, and a dead one is asked ever less often, at most every
`interval_s`. `kick(endpoint)` makes the task look at the endpoint's state again at once; the
client calls it when a request finds the endpoint down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping

from ng_cli.errors import NgError
from ng_cli.servers.http import HttpClient, Timeouts
from ng_cli.upstream.pool import Endpoint, EndpointPool

__all__ = ["HealthProber"]

logger = logging.getLogger("ng_cli.upstream")


class HealthProber:
    """Background health probes over an `EndpointPool`."""

    def __init__(
        self,
        pool: EndpointPool,
        http: HttpClient,
        *,
        probe_url: Callable[[Endpoint], str],
        headers: Callable[[Endpoint], Mapping[str, str]],
        interval_s: float,
        timeouts: Timeouts,
        on_rejoin: Callable[[Endpoint], None],
    ) -> None:
        self.pool = pool
        self.http = http
        self.probe_url = probe_url
        self.headers = headers
        self.interval_s = interval_s
        self.timeouts = timeouts
        self.on_rejoin = on_rejoin
        self.before_rejoin: Callable[[Endpoint], Awaitable[str | None]] | None = None
        """Runs once a down endpoint's probe passes, before it rejoins; a reason keeps it out
        (a model server with weight updates brings a restarted engine to the current weights)."""
        self._kicks: dict[Endpoint, asyncio.Event] = {}
        self._tasks: dict[Endpoint, asyncio.Task[None]] = {}
        self._is_started = False

    def start(self) -> None:
        """Start one probing task per endpoint (inside the running event loop)."""
        self._is_started = True
        self.sync()

    def sync(self) -> None:
        """Probe exactly the pool's current endpoints (after `EndpointPool.replace`)."""
        if not self._is_started:
            return
        listed = set(self.pool.endpoints)
        for endpoint in [endpoint for endpoint in self._tasks if endpoint not in listed]:
            self._tasks.pop(endpoint).cancel()
            self._kicks.pop(endpoint, None)
        for endpoint in self.pool.endpoints:
            if endpoint not in self._tasks:
                self._kicks[endpoint] = asyncio.Event()
                self._tasks[endpoint] = asyncio.create_task(
                    self._watch(endpoint), name=f"probe {endpoint.base_url}"
                )

    async def stop(self) -> None:
        self._is_started = False
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = {}

    def kick(self, endpoint: Endpoint) -> None:
        """Re-read the endpoint's state now (it just went down: probe when its cool-down ends)."""
        kick = self._kicks.get(endpoint)
        if kick is not None:
            kick.set()

    async def probe(self, endpoint: Endpoint) -> str | None:
        """One probe; None if it passed, else why it failed."""
        try:
            await self.http.request_json(
                "GET", self.probe_url(endpoint), headers=self.headers(endpoint), timeouts=self.timeouts
            )
        except NgError as error:
            return error.message
        return None

    async def _watch(self, endpoint: Endpoint) -> None:
        loop = asyncio.get_running_loop()
        kick = self._kicks[endpoint]
        while True:
            delay_s = self.interval_s if endpoint.is_healthy else max(0.0, endpoint.readmit_at - loop.time())
            if await _wait(kick, delay_s):
                continue
            await self.check(endpoint)

    async def check(self, endpoint: Endpoint) -> None:
        """Probe `endpoint` once and take the pool's view of it from the outcome.

        A probe that fails while the endpoint answered calls meanwhile says it is busy, not down
        (vLLM's `/health` can wait seconds behind a full batch): it stays in the pool. Taking a
        lone busy engine out stalled every call until the next probe."""
        loop = asyncio.get_running_loop()
        answered = endpoint.answered
        try:
            error = await self.probe(endpoint)
            if error is None and self._rejoins(endpoint, loop.time()) and self.before_rejoin is not None:
                error = await self.before_rejoin(endpoint)
        except Exception as exc:  # a bug here must not end probing: the endpoint would never rejoin
            logger.exception("health probe of %s crashed", endpoint.base_url)
            error = f"{type(exc).__name__}: {exc}"
        if error is not None and endpoint.is_healthy and endpoint.answered > answered:
            logger.info(
                "endpoint %s is busy (its health probe failed: %s) but answered %d calls meanwhile: kept",
                endpoint.base_url,
                error,
                endpoint.answered - answered,
            )
            return
        self._record(endpoint, error, now=loop.time())

    def _rejoins(self, endpoint: Endpoint, now: float) -> bool:
        """Whether a passed probe now brings this endpoint back (see `record_probe_success`)."""
        return not endpoint.is_healthy and not endpoint.is_retired and now >= endpoint.readmit_at

    def _record(self, endpoint: Endpoint, error: str | None, *, now: float) -> None:
        if error is None:
            if self.pool.record_probe_success(endpoint, now=now):
                logger.warning(
                    "endpoint %s passed its health probe and is back in the pool", endpoint.base_url
                )
                self.on_rejoin(endpoint)
        elif self.pool.record_failure(endpoint, f"health probe failed: {error}", now=now):
            logger.warning(
                "endpoint %s failed its health probe and is out of the pool: %s", endpoint.base_url, error
            )


async def _wait(kick: asyncio.Event, delay_s: float) -> bool:
    """Sleep up to `delay_s`; True (and reset) if kicked meanwhile."""
    try:
        await asyncio.wait_for(kick.wait(), timeout=delay_s)
    except TimeoutError:
        return False
    kick.clear()
    return True
