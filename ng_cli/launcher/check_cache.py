"""A clean config check remembered, so that starting an unchanged stack again skips its subprocess.

`check_instances` imports every app.py of the stack in a child process: about 0.9 s of the 2.4 s
that `ng_run` takes to ready on two cores (issue 38), paid again on every start of the same stack.
A check that found nothing to refuse is remembered under a key made of

- the blocks as checked (every value: HMAC'd with a random per-user salt, so the key file names no
  secret, not even as a plain digest a short password could be guessed from),
- the interpreter, and the modification time and size of every `.py` file under ng_cli and under
  each server's root folder (its `app.py`'s grandparent: the folder `resources_servers/` and the
  like sit in, whose other modules an app.py may import), dot folders, environments and `__pycache__` skipped,
- the interpreter's site-packages folders' modification times (a package installed or removed),

in `~/.cache/ng_cli/checks/` (`$NG_STATE_DIR/checks/`; 0600 files in a 0700 folder). Any change
to those is a new key, so the check runs again. What the key cannot see (a data file a config
names, deleted since) the server's own start-up validation still refuses, by the same function:
the check only makes that refusal come before anything starts. `NG_CONFIG_CHECK_CACHE=0` turns the
memory off.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

from ng_cli.servers.check import CheckReport

__all__ = ["CACHE_ENV", "KEEP", "MAX_FILES", "cache_key", "remember", "remembered"]

CACHE_ENV = "NG_CONFIG_CHECK_CACHE"
KEEP = 256
"""Reports kept; beyond that the oldest go (each is a few hundred bytes)."""
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
_NOT_SOURCE = frozenset({"__pycache__", "node_modules", "site-packages", "venv"})
"""Folders under a root that hold no source of the stack's own (environments, caches)."""
MAX_FILES = 20_000
"""More `.py` files than this under the roots (a server whose root is a home folder) and the check
is not remembered: stat-ing them would cost what the cache saves."""


def _folder() -> Path:
    return Path(os.environ.get("NG_STATE_DIR") or Path.home() / ".cache" / "ng_cli") / "checks"


def _enabled(python: str) -> bool:
    """On unless turned off; only for this interpreter, whose site-packages the key can see."""
    off = os.environ.get(CACHE_ENV, "").strip().lower() in ("0", "false", "no", "off")
    return not off and python == sys.executable


def cache_key(payload: bytes, app_paths: Iterable[str], python: str) -> str | None:
    """The key of this check, or None where the memory is off or the cache folder cannot be used."""
    if not _enabled(python):
        return None
    salt = _salt()
    if salt is None:
        return None
    signature = hashlib.sha256()
    signature.update(hmac.new(salt, payload, hashlib.sha256).digest())
    signature.update(python.encode())
    roots = {_PACKAGE_ROOT, *(_server_root(Path(path)) for path in app_paths)}
    files = 0
    for root in sorted(roots):
        for line in _tree_signature(root):
            files += 1
            if files > MAX_FILES:
                return None
            signature.update(line.encode())
    for name in ("purelib", "platlib"):
        with contextlib.suppress(KeyError, OSError):
            site = sysconfig.get_paths()[name]
            signature.update(f"{site}:{os.stat(site).st_mtime_ns}".encode())
    return signature.hexdigest()


def remembered(key: str) -> CheckReport | None:
    """The clean report stored under `key`, if any."""
    try:
        return CheckReport.model_validate_json((_folder() / f"{key}.json").read_bytes())
    except (OSError, ValueError):
        return None


def remember(key: str, report: CheckReport) -> None:
    """Store a clean report (nothing refused); a report with problems is never stored."""
    if report.problems or report.incomplete or report.unimportable:
        return
    with contextlib.suppress(OSError):
        _write_private(_folder() / f"{key}.json", report.model_dump_json().encode())
        stored = sorted(_folder().glob("*.json"), key=lambda path: path.stat().st_mtime_ns)
        for old in stored[:-KEEP]:
            old.unlink(missing_ok=True)


def _server_root(app_path: Path) -> Path:
    """`<root>/<server type>/<implementation>/app.py` -> root (a shorter path: its top)."""
    parents = app_path.resolve().parents
    return parents[min(2, len(parents) - 1)]


def _tree_signature(root: Path) -> Iterable[str]:
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in _NOT_SOURCE)
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with contextlib.suppress(OSError):
                    stat = os.stat(path)
                    yield f"{path}:{stat.st_mtime_ns}:{stat.st_size}\n"


def _salt() -> bytes | None:
    path = _folder() / "salt"
    with contextlib.suppress(OSError):
        return path.read_bytes()
    with contextlib.suppress(OSError):
        _write_private(path, secrets.token_bytes(32))
        return path.read_bytes()
    return None


def _write_private(path: Path, data: bytes) -> None:
    """Whole or not at all: a temporary file, then a rename."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(temporary, path)
