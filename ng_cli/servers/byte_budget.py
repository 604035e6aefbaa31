"""`ByteBudget`: a semaphore counted in bytes, first come first served, with a bounded wait.

What `BodyLimitMiddleware` holds request bodies against, so that the bodies of all requests a
server is serving at once stay under one total. First come, first served: a large body is not
passed over forever by a stream of small ones.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["ByteBudget"]


class ByteBudget:
    """`capacity` bytes shared by holders; `acquire` waits in line until its bytes are free."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._line: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        """How many acquirers are waiting in line."""
        return len(self._line)

    async def acquire(self, size: int, *, timeout_s: float) -> bool:
        """Take `size` bytes (at most `capacity`), waiting up to `timeout_s`; False if it timed out
        (then nothing is held). A cancelled waiter holds nothing either."""
        if size > self.capacity:
            raise ValueError(f"{size} bytes can never fit a budget of {self.capacity}")
        if not self._line and self.used + size <= self.capacity:
            self.used += size
            return True
        entry = (size, asyncio.get_running_loop().create_future())
        self._line.append(entry)
        granted = entry[1]
        try:
            async with asyncio.timeout(timeout_s):
                await granted
        except TimeoutError:
            if _was_granted(granted):  # granted as the clock ran out: it is held
                return True
            self._leave(entry)
            return False
        except BaseException:
            if _was_granted(granted):
                self.release(size)
            else:
                self._leave(entry)
            raise
        return True

    def release(self, size: int) -> None:
        """Give `size` held bytes back; the waiters at the head of the line that now fit go in."""
        self.used -= size
        self._admit()

    def _leave(self, entry: tuple[int, asyncio.Future[None]]) -> None:
        if entry in self._line:
            self._line.remove(entry)
        self._admit()  # the one behind may fit now that the head is gone

    def _admit(self) -> None:
        while self._line and self.used + self._line[0][0] <= self.capacity:
            size, granted = self._line.popleft()
            if granted.done():
                continue  # cancelled while in line
            self.used += size
            granted.set_result(None)


def _was_granted(granted: asyncio.Future[None]) -> bool:
    return granted.done() and not granted.cancelled()
