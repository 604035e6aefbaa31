"""The key file through which `ng_update_weights` reaches a running stack's admin routes.

A model server's admin routes (`weight_updates: true`) answer only with its engines' key, which
ng_run picks at random per run unless the config sets `api_key`. A key must never travel in
argv, so ng_run leaves the keys of such instances in a file only its user can read,

    ~/.cache/ng_cli/admin/<digest of the head server's URL>.json     (0600, in a 0700 folder)

and removes it when the stack stops. Commands find it from the head server's URL, as they find
everything else. A trainer on another machine sets `NG_WEIGHTS_KEY` instead (the configured key).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["KEY_ENV", "admin_key", "key_file", "remove_admin_keys", "write_admin_keys"]

KEY_ENV = "NG_WEIGHTS_KEY"


def key_file(head_url: str) -> Path:
    base = Path(os.environ.get("NG_STATE_DIR") or Path.home() / ".cache" / "ng_cli")
    digest = hashlib.sha256(head_url.rstrip("/").encode()).hexdigest()[:24]
    return base / "admin" / f"{digest}.json"


def write_admin_keys(head_url: str, keys: Mapping[str, str]) -> Path | None:
    """Write `instance -> key` for this stack (nothing when no instance takes weight updates)."""
    if not keys:
        return None
    path = key_file(head_url)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"head_url": head_url, "pid": os.getpid(), "keys": dict(keys)}, handle)
    os.replace(temporary, path)
    return path


def remove_admin_keys(head_url: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        key_file(head_url).unlink()


def admin_key(head_url: str, instance: str) -> str | None:
    """The key of `instance`: `NG_WEIGHTS_KEY` when set, else ng_run's key file; None if neither."""
    configured = os.environ.get(KEY_ENV)
    if configured:
        return configured
    try:
        stored = json.loads(key_file(head_url).read_text())
    except (OSError, ValueError):
        return None
    keys = stored.get("keys") if isinstance(stored, dict) else None
    key = keys.get(instance) if isinstance(keys, dict) else None
    return key if isinstance(key, str) else None
