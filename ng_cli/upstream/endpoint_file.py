"""`EndpointFile`: upstream URLs published in a file by whoever runs the engines (NeMo Gym's key).

An RL trainer that restarts or moves its vLLM engines rewrites the file; the model server
follows without a restart. The file holds one URL per line (blank lines and `#` comments are
skipped). It is checked every `check_interval_s` by modification time and re-read when that
changes. A missing or empty file means "being rotated": the last URLs stay in use for
`stale_grace_s`, then they are given up (requests answer 503 naming the file). A file whose
content is not a list of http(s) URLs is reported and ignored; the last good URLs stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["EndpointFile", "parse_endpoint_urls"]

logger = logging.getLogger("ng_cli.upstream")


def parse_endpoint_urls(text: str, check: Callable[[str], str]) -> list[str]:
    """The URLs listed in `text`, each passed through `check` (which raises ValueError)."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [check(line) for line in lines if line]


class EndpointFile:
    """Watches one endpoint file and reports new URL lists and lasting absence."""

    def __init__(
        self,
        path: str,
        *,
        check_interval_s: float,
        stale_grace_s: float,
        check_url: Callable[[str], str],
        on_urls: Callable[[list[str]], None],
        on_stale: Callable[[str], None],
    ) -> None:
        self.path = Path(path).expanduser()
        self.check_interval_s = check_interval_s
        self.stale_grace_s = stale_grace_s
        self.check_url = check_url
        self.on_urls = on_urls
        self.on_stale = on_stale
        self._mtime_ns: int | None = None
        self._missing_since: float | None = None
        self._is_stale = False
        self._task: asyncio.Task[None] | None = None

    def read(self) -> list[str] | None:
        """The URLs now in the file, or None when it is missing, empty or unreadable."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError:
            return None
        try:
            urls = parse_endpoint_urls(text, self.check_url)
        except ValueError as error:
            logger.warning("endpoint file %s ignored: %s", self.path, error)
            return None
        return urls or None

    def check(self, *, now: float | None = None) -> None:
        """One check: report new URLs, or count the time the file has been unpublished."""
        now = time.monotonic() if now is None else now
        try:
            mtime_ns = os.stat(self.path).st_mtime_ns
        except OSError:
            self._unpublished(now)
            return
        if mtime_ns == self._mtime_ns and self._missing_since is None:
            return
        self._mtime_ns = mtime_ns
        urls = self.read()
        if urls is None:
            self._unpublished(now)
            return
        self._missing_since = None
        self._is_stale = False
        self.on_urls(urls)

    def start(self) -> None:
        """Check the file every `check_interval_s` (inside the running event loop)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"endpoint file {self.path}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_s)
            try:
                self.check()
            except Exception:  # a bug here must not stop following the file
                logger.exception("checking endpoint file %s failed", self.path)

    def _unpublished(self, now: float) -> None:
        if self._missing_since is None:
            self._missing_since = now
            logger.warning(
                "endpoint file %s is missing or empty; keeping the current endpoints for up to %g s",
                self.path,
                self.stale_grace_s,
            )
        elif not self._is_stale and now - self._missing_since > self.stale_grace_s:
            self._is_stale = True
            self.on_stale(
                f"endpoint file {self.path} unpublished (missing or empty) for more than "
                f"endpoint_stale_grace_s={self.stale_grace_s:g} s"
            )
