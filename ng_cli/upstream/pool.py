"""`EndpointPool`: which upstream endpoint serves a session — health, load, affinity, failover.

A pure state machine: no I/O and no clock of its own (callers pass `now`, a monotonic time in
seconds), so every transition is unit-tested without sockets or sleeps.

    healthy ──request failure (connect error, timeout, 5xx) or failed probe──> down
       ^                                                                         │
       └──────────── a probe succeeds once the cool-down has ended ──────────────┘

When the last healthy endpoint goes down, `all_down_since` records when; the client opens its
circuit once that is older than the grace period, and the first endpoint back closes it.

The cool-down doubles with each consecutive failure (from `cooldown_s` up to `max_cooldown_s`),
so an endpoint whose `/health` answers but whose generations fail flaps ever more slowly.
A successful request resets it.

Routing: a session keeps the endpoint it was first given (affinity) while that endpoint is
healthy. A new session, or one whose endpoint is down, goes to the healthy endpoint with the
fewest requests in flight; ties rotate, so idle endpoints share new sessions evenly. Moving a
session off a down endpoint is a failover, and is counted.

The list of endpoints can be replaced while running (`replace`, for `endpoint_file`): URLs that
stay keep their state; the others are retired, which drains them: requests already in flight
finish there, no new request goes there, and their sessions move (not counted as failovers).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Endpoint", "EndpointPool"]


@dataclass(eq=False)
class Endpoint:
    """One upstream server and what the pool knows about it right now."""

    index: int
    base_url: str
    """The OpenAI-compatible API root, e.g. `http://gpu-1:8000/v1`."""
    root_url: str
    """The server root (vLLM's `/health` and `/tokenize` live here, not under `/v1`)."""
    is_healthy: bool = True
    in_flight: int = 0
    consecutive_failures: int = 0
    readmit_at: float = 0.0
    """Monotonic time before which a successful probe does not bring the endpoint back."""
    last_error: str | None = None
    is_retired: bool = False
    """No longer listed (the endpoint file moved on); only in-flight requests still use it."""
    answered: int = 0
    """Calls it has answered since start (a busy endpoint whose probe is slow still answers)."""

    def __repr__(self) -> str:
        state = "healthy" if self.is_healthy else f"down ({self.last_error})"
        return f"Endpoint({self.base_url}, {state}, in_flight={self.in_flight})"


class EndpointPool:
    """Health, load and session affinity over a fixed list of endpoints."""

    def __init__(
        self,
        base_urls: Sequence[str],
        *,
        root_urls: Sequence[str] | None = None,
        cooldown_s: float = 0.25,
        max_cooldown_s: float = 5.0,
        max_sessions: int = 100_000,
    ) -> None:
        if not base_urls:
            raise ValueError("an endpoint pool needs at least one base URL")
        if cooldown_s <= 0 or max_cooldown_s < cooldown_s:
            raise ValueError("need 0 < cooldown_s <= max_cooldown_s")
        roots = list(root_urls) if root_urls is not None else list(base_urls)
        self.endpoints: tuple[Endpoint, ...] = tuple(
            Endpoint(index=i, base_url=url, root_url=roots[i]) for i, url in enumerate(base_urls)
        )
        self.cooldown_s = cooldown_s
        self.max_cooldown_s = max_cooldown_s
        self.max_sessions = max_sessions
        self.failovers = 0
        """Sessions moved off a down endpoint, since start."""
        self.all_down_since: float | None = None
        """Monotonic time when the last healthy endpoint went down; None while one is up."""
        self._affinity: OrderedDict[str, Endpoint] = OrderedDict()
        self._cursor = 0
        self._next_index = len(self.endpoints)
        self.unlisted_reason: str | None = None
        """Why the pool has no endpoints at all (set when `replace` empties it)."""

    def replace(
        self, base_urls: Sequence[str], *, root_urls: Sequence[str] | None = None, reason: str | None = None
    ) -> tuple[list[Endpoint], list[Endpoint]]:
        """Serve `base_urls` from now on; (added, retired) endpoints. Kept URLs keep their state."""
        roots = list(root_urls) if root_urls is not None else list(base_urls)
        current = {endpoint.base_url: endpoint for endpoint in self.endpoints}
        kept: list[Endpoint] = []
        added: list[Endpoint] = []
        for url, root in zip(base_urls, roots, strict=True):
            endpoint = current.pop(url, None)
            if endpoint is None:
                endpoint = Endpoint(index=self._next_index, base_url=url, root_url=root)
                self._next_index += 1
                added.append(endpoint)
            kept.append(endpoint)
        retired = list(current.values())
        for endpoint in retired:
            endpoint.is_retired = True
            endpoint.is_healthy = False
            endpoint.last_error = "retired: no longer listed in the endpoint file"
        self.endpoints = tuple(kept)
        self.unlisted_reason = None if kept else reason
        return added, retired

    # -- routing ------------------------------------------------------------------------------

    def route(self, session_id: str | None) -> Endpoint | None:
        """The endpoint for this session's next request, or None when every endpoint is down."""
        current = self._affinity.get(session_id) if session_id is not None else None
        if current is not None and current.is_healthy:
            self._affinity.move_to_end(session_id)  # type: ignore[arg-type]
            return current
        chosen = self._least_loaded()
        if chosen is None:
            return None
        if current is not None and not current.is_retired:
            self.failovers += 1
        if session_id is not None:
            self._remember(session_id, chosen)
        return chosen

    def endpoint_of(self, session_id: str) -> Endpoint | None:
        """The endpoint a session is pinned to, if any (it may be down)."""
        return self._affinity.get(session_id)

    @property
    def session_count(self) -> int:
        return len(self._affinity)

    def healthy(self) -> list[Endpoint]:
        return [endpoint for endpoint in self.endpoints if endpoint.is_healthy]

    def _least_loaded(self) -> Endpoint | None:
        n = len(self.endpoints)
        best: int | None = None
        best_key: tuple[int, int] | None = None
        for position, endpoint in enumerate(self.endpoints):
            if not endpoint.is_healthy:
                continue
            key = (endpoint.in_flight, (position - self._cursor) % n)
            if best_key is None or key < best_key:
                best, best_key = position, key
        if best is None:
            return None
        self._cursor = (best + 1) % n
        return self.endpoints[best]

    def _remember(self, session_id: str, endpoint: Endpoint) -> None:
        self._affinity[session_id] = endpoint
        self._affinity.move_to_end(session_id)
        while len(self._affinity) > self.max_sessions:
            self._affinity.popitem(last=False)

    # -- load -----------------------------------------------------------------------------------

    def begin(self, endpoint: Endpoint) -> None:
        """A request to `endpoint` starts."""
        endpoint.in_flight += 1

    def end(self, endpoint: Endpoint) -> None:
        """A request to `endpoint` finished (whatever its outcome)."""
        endpoint.in_flight = max(0, endpoint.in_flight - 1)

    # -- health ---------------------------------------------------------------------------------

    def record_success(self, endpoint: Endpoint) -> None:
        """A request answered (2xx or 4xx): the endpoint works, its failure streak ends."""
        endpoint.consecutive_failures = 0
        endpoint.answered += 1

    def record_failure(self, endpoint: Endpoint, error: str, *, now: float) -> bool:
        """A request or probe failed; the endpoint is down for a cool-down. True if it was up.

        Failures inside a running cool-down (the other requests that were in flight when the
        endpoint died) do not lengthen it: one outage is one step of the backoff.
        """
        was_healthy = endpoint.is_healthy
        endpoint.last_error = error
        if was_healthy or now >= endpoint.readmit_at:
            endpoint.consecutive_failures += 1
            endpoint.readmit_at = now + self.cooldown_for(endpoint.consecutive_failures)
        endpoint.is_healthy = False
        if self.all_down_since is None and not any(other.is_healthy for other in self.endpoints):
            self.all_down_since = now
        return was_healthy

    def record_probe_success(self, endpoint: Endpoint, *, now: float) -> bool:
        """A health probe passed. True if that brought the endpoint back into the pool."""
        if endpoint.is_healthy or endpoint.is_retired or now < endpoint.readmit_at:
            return False
        endpoint.is_healthy = True
        endpoint.last_error = None
        self.all_down_since = None
        return True

    def readmit(self, endpoint: Endpoint) -> None:
        """Back in the pool now, cool-down or not: an update just loaded and checked its weights."""
        endpoint.is_healthy = True
        endpoint.last_error = None
        endpoint.consecutive_failures = 0
        self.all_down_since = None

    def cooldown_for(self, consecutive_failures: int) -> float:
        """Seconds out of the pool after this many failures in a row: doubling, capped."""
        exponent = min(max(consecutive_failures - 1, 0), 30)
        return min(self.max_cooldown_s, self.cooldown_s * 2.0**exponent)

    def describe_down(self) -> str:
        """One line per down endpoint with its last error, for 503 messages."""
        if not self.endpoints:
            return self.unlisted_reason or "no endpoint is listed"
        return "; ".join(
            f"{endpoint.base_url}: {endpoint.last_error or 'down'}"
            for endpoint in self.endpoints
            if not endpoint.is_healthy
        )
