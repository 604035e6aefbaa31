"""`EndpointFile`: upstream URLs published in a file by whoever runs the engines (NeMo Gym's key).

An RL trainer that restarts or moves its vLLM engines rewrites the file; the model server
follows without a restart. The file holds one URL per line (blank lines and `#` comments are
skipped). It is checked every `check_interval_s` by modification time and re-read when that
changes. A missing or empty file means "being rotated": the last URLs stay in use for
`stale_grace_s`, then they are given up (requests answer 503 naming the file). A file whose
content is not a list of http(s) URLs (or lists one endpoint with two passwords) is logged as an
error once per change and ignored: the last good URLs stay in use for as long as it lasts,
since a half-written or garbled file says nothing about the engines being gone. A URL listed
twice is served once (else it gets two pool entries and two of every metric series), with a
warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from ng_cli.upstream.userinfo import without_userinfo

__all__ = ["EndpointFile", "parse_endpoint_urls"]

logger = logging.getLogger("ng_cli.upstream")


def parse_endpoint_urls(text: str, check: Callable[[str], str]) -> list[str]:
    """The URLs listed in `text`, each passed through `check` (which raises ValueError)."""
    return [url for _, url in _numbered_urls(text, check)]


def _numbered_urls(text: str, check: Callable[[str], str]) -> list[tuple[int, str]]:
    lines = ((number, line.split("#", 1)[0].strip()) for number, line in enumerate(text.splitlines(), 1))
    return [(number, check(line)) for number, line in lines if line]


def _unique(numbered: list[tuple[int, str]], path: Path) -> list[str]:
    """Each endpoint once, in file order; ValueError if one is listed with different credentials."""
    first: dict[str, str] = {}
    again: list[str] = []
    for number, url in numbered:
        name = without_userinfo(url)
        if name not in first:
            first[name] = url
        elif first[name] != url:
            raise ValueError(f"line {number} lists {name} again with other credentials")
        else:
            again.append(f"{name} (line {number})")
    if again:
        logger.warning(
            "endpoint file %s lists %s again; each endpoint is served once", path, " and ".join(again)
        )
    return list(first.values())


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
        self._last_urls: list[str] = []
        self._task: asyncio.Task[None] | None = None

    def read(self) -> list[str] | None:
        """The URLs now in the file, or None when it is missing, empty or unreadable.

        ValueError when it holds something other than http(s) URLs (UnicodeDecodeError is one)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError:
            return None
        return _unique(_numbered_urls(text, self.check_url), self.path) or None

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
        try:
            urls = self.read()
        except ValueError as error:
            self._missing_since = None  # published, though unusable: no rotation to wait for
            logger.error(
                "endpoint file %s ignored: %s; %s until it lists URLs again", self.path, error, self._kept()
            )
            return
        if urls is None:
            self._unpublished(now)
            return
        self._missing_since = None
        self._is_stale = False
        self._last_urls = urls
        self.on_urls(urls)

    def _kept(self) -> str:
        """What is served while the file is unusable (passwords taken out)."""
        if self._is_stale:
            return "no endpoints are served (the last ones were given up)"
        if self._last_urls:
            return f"keeping the last good endpoints {[without_userinfo(url) for url in self._last_urls]}"
        return "keeping the endpoints in use (base_url's)"

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
