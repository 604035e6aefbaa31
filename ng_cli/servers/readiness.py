"""Readiness: the one way anything here waits for a server to serve.

ng_run's servers (`launcher/health.py`) and engines (`launcher/engines.py`), the test helpers'
uvicorn threads and children (`servers/testing.py`) and the test engines all poll through
`poll_until`, with `probe_health` or `serves_model` as the question. Probes use the standard
library (`http.client`), so the launcher stays light.

Pacing: a try that failed fast (a refused connection) is followed by a short wait that doubles
from `first_retry_s` up to `max_retry_s`, so start-up is noticed within milliseconds without
spinning; a try that itself took that long (a probe the kernel accepted and the server has not
answered yet) is followed at once.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

__all__ = ["poll_until", "probe_health", "serves_model"]


def poll_until(
    ready: Callable[[], bool],
    *,
    timeout_s: float,
    check: Callable[[], None] | None = None,
    cancelled: threading.Event | None = None,
    first_retry_s: float = 0.005,
    max_retry_s: float = 0.1,
) -> bool:
    """Ask `ready()` until it says True (True), `timeout_s` passes or `cancelled` is set (False).

    `check` runs before each try and raises to end the wait early with its own error (a process
    that exited before it was ready); `ready` itself must not raise for "not yet".
    """
    deadline = time.monotonic() + timeout_s
    retry_s = first_retry_s
    while cancelled is None or not cancelled.is_set():
        if check is not None:
            check()
        started = time.monotonic()
        if ready():
            return True
        now = time.monotonic()
        if now >= deadline:
            return False
        pause = min(retry_s - (now - started), deadline - now)
        if pause > 0:
            if cancelled is not None:
                cancelled.wait(pause)
            else:
                time.sleep(pause)
        retry_s = min(retry_s * 2, max_retry_s)
    return False


def probe_health(url: str, *, timeout_s: float) -> bool:
    """True if `GET <url>/health` answers 200 within `timeout_s`; any failure is False."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    try:
        connection.request("GET", "/health")
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def serves_model(root_url: str, *, api_key: str, model: str, timeout_s: float = 1.0) -> bool:
    """True when an OpenAI-compatible engine's `/health` answers 200 and `/v1/models` (with the
    key) lists `model`: up, and serving under the name the stack will ask for."""
    parts = urlsplit(root_url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    try:
        connection.request("GET", "/health")
        health = connection.getresponse()
        health.read()
        if health.status != 200:
            return False
        connection.request("GET", "/v1/models", headers={"Authorization": f"Bearer {api_key}"})
        answer = connection.getresponse()
        if answer.status != 200:
            return False
        listed = json.loads(answer.read() or b"{}").get("data") or []
        return any(isinstance(entry, dict) and entry.get("id") == model for entry in listed)
    except (OSError, http.client.HTTPException, ValueError, AttributeError):
        return False
    finally:
        connection.close()
