"""What bounds one HTTP hop: its timeouts, its retries, its connection pool's size.

Plain dataclasses apart from `http.py` (which re-exports them), so the launcher and the config
classes that hold them load without aiohttp.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp

__all__ = ["ConnectionLimits", "RetryPolicy", "Timeouts"]


@dataclass(frozen=True)
class Timeouts:
    """Deadlines for one HTTP hop; none of them is ever unbounded."""

    connect_s: float = 5.0
    """Time to establish the TCP connection (and get a pooled one)."""
    read_s: float = 300.0
    """Longest silence between two chunks of the answer."""
    total_s: float = 600.0
    """Whole request, from start to the last byte of the body."""

    def capped(self, seconds: float) -> Timeouts:
        """The same timeouts, none longer than `seconds` (what is left of the caller's deadline)."""
        return Timeouts(
            connect_s=min(self.connect_s, seconds),
            read_s=min(self.read_s, seconds),
            total_s=min(self.total_s, seconds),
        )

    def to_aiohttp(self) -> aiohttp.ClientTimeout:
        import aiohttp  # loaded by then: only the HTTP client calls this

        return aiohttp.ClientTimeout(total=self.total_s, sock_connect=self.connect_s, sock_read=self.read_s)


@dataclass(frozen=True)
class ConnectionLimits:
    """How many connections one `HttpClient` holds open: in all, and to one host:port (0: no limit).

    NeMo Gym's `global_aiohttp_connector_limit` and `..._per_host`, as the launcher passes them to
    every server of a stack (`ServerSpec.http_limits`)."""

    total: int = 2048
    per_host: int = 0


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter."""

    max_attempts: int = 3
    backoff_s: float = 0.1
    max_backoff_s: float = 2.0

    def delay_s(self, attempt: int) -> float:
        """Sleep before attempt number `attempt + 1` (attempts count from 1)."""
        return random.uniform(0.0, min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))
