"""The key file through which `ng_update_weights` reaches a running stack's admin routes.

A model server's admin routes (`weight_updates: true`) answer only with its engines' key, which
ng_run picks at random per run unless the config sets `api_key`. A key must never travel in
argv, so ng_run leaves the keys of such instances in a file only its user can read,

    ~/.cache/ng_cli/admin/<digest of the head server's URL>.json     (0600, in a 0700 folder)

and removes it when the stack stops. Commands find it from the head server's URL, as they find
everything else (`localhost` and `127.0.0.1` name the same head). A trainer on another machine sets
`NG_WEIGHTS_KEY` instead (the configured key).

The file also holds ng_run's pid and each instance's URL: a key is sent only to the URL ng_run wrote
beside it, and only while that ng_run lives. A file left by a SIGKILLed ng_run is ignored (and
removed), so a head that later takes the same port never receives the old stack's key.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "KEY_ENV",
    "StoredKey",
    "admin_key",
    "key_file",
    "remove_admin_keys",
    "stored_key",
    "write_admin_keys",
]

KEY_ENV = "NG_WEIGHTS_KEY"


@dataclass(frozen=True)
class StoredKey:
    """An instance's key as ng_run left it: where to send it, and which ng_run it belongs to."""

    key: str = field(repr=False)
    url: str | None
    """The instance's URL as ng_run wrote it (None: from NG_WEIGHTS_KEY, which names no URL)."""
    pid: int | None


def key_file(head_url: str) -> Path:
    base = Path(os.environ.get("NG_STATE_DIR") or Path.home() / ".cache" / "ng_cli")
    digest = hashlib.sha256(canonical_head_url(head_url).encode()).hexdigest()[:24]
    return base / "admin" / f"{digest}.json"


def canonical_head_url(head_url: str) -> str:
    """`scheme://ip:port` of a head URL: `http://localhost:11000/` and `http://127.0.0.1:11000` are one."""
    parts = urllib.parse.urlsplit(head_url.strip().rstrip("/"))
    host = parts.hostname or ""
    try:
        address = socket.gethostbyname(host) if host else host
    except OSError:
        address = host
    if address in ("0.0.0.0", "localhost"):
        address = "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme or 'http'}://{address}:{port}"


def write_admin_keys(
    head_url: str, keys: Mapping[str, str], urls: Mapping[str, str] | None = None
) -> Path | None:
    """Write `instance -> key` (and each instance's URL) for this stack (nothing when no instance
    takes weight updates)."""
    if not keys:
        return None
    path = key_file(head_url)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(
            {"head_url": head_url, "pid": os.getpid(), "keys": dict(keys), "urls": dict(urls or {})}, handle
        )
    os.replace(temporary, path)
    return path


def remove_admin_keys(head_url: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        key_file(head_url).unlink()


def admin_key(head_url: str, instance: str) -> str | None:
    """The key of `instance`: `NG_WEIGHTS_KEY` when set, else ng_run's key file; None if neither."""
    stored = stored_key(head_url, instance)
    return stored.key if stored is not None else None


def stored_key(head_url: str, instance: str) -> StoredKey | None:
    """`NG_WEIGHTS_KEY` when set, else the key file of the ng_run that serves `head_url` while it
    lives; None if neither (a file whose ng_run is gone is removed)."""
    configured = os.environ.get(KEY_ENV)
    if configured:
        return StoredKey(configured, url=None, pid=None)
    path = key_file(head_url)
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict):
        return None
    pid = stored.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        with contextlib.suppress(OSError):
            path.unlink()  # left by an ng_run that was killed: never hand its key to a later head
        return None
    keys, urls = stored.get("keys"), stored.get("urls")
    key = keys.get(instance) if isinstance(keys, dict) else None
    url = urls.get(instance) if isinstance(urls, dict) else None
    if not isinstance(key, str):
        return None
    return StoredKey(key, url=url if isinstance(url, str) else None, pid=pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process has this pid now: not our ng_run
        return False
    return True
