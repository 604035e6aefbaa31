"""Whether every engine's node sees a checkpoint as the model server does, asked before any pause.

On one machine the engines read the path the model server checked. On a Ray cluster an engine on
another node reads the same path on its own disk: shared storage shows it the same files, a
directory only on the trainer's node shows it nothing (or an older copy). So before an update
pauses anything, each engine on a network address lists what its node sees at the path (file
names, sizes, each safetensors header's digest: `sight`, whose copy runs in the engine) and any
difference refuses the update, naming the engine and the file.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import os
import urllib.parse
from collections.abc import Sequence
from typing import Any

from ng_cli.upstream.engine_admin import EngineAdmin, PhaseError

__all__ = ["is_remote", "sight", "unseen"]

_ANSWER_S = 5.0
"""How long an engine that could not be asked has to answer `/health` before it counts as gone."""


async def unseen(path: str, engines: Sequence[EngineAdmin], *, deadline_s: float) -> dict[str, str]:
    """Engine root URL -> how its node's view of `path` differs from this server's (none: all see it).

    Engines on loopback share this machine's disk and are not asked."""
    remote = [engine for engine in engines if is_remote(engine.root_url)]
    if not remote:
        return {}
    here = json.loads(await asyncio.to_thread(sight, path))
    answers = await asyncio.gather(
        *(engine.checkpoint_files(path, deadline_s=deadline_s) for engine in remote), return_exceptions=True
    )
    differences: dict[str, str] = {}
    for engine, answer in zip(remote, answers, strict=True):
        if isinstance(answer, PhaseError):
            if await engine.answers(deadline_s=_ANSWER_S):
                differences[engine.root_url] = f"could not ask it ({answer.reason})"
            continue  # gone (its node lost): the update's pause finds it lost and goes on without it
        if isinstance(answer, BaseException):
            raise answer
        for worker in answer:
            difference = _difference(here, json.loads(worker))
            if difference is not None:
                differences[engine.root_url] = difference
                break
    return differences


def _difference(here: dict[str, Any], there: dict[str, Any]) -> str | None:
    if "" in here:  # this server cannot list it either: the checkpoint's own check speaks for it
        return None
    if "" in there:
        return f"its node cannot read the directory: {there['']}"
    missing = sorted(set(here) - set(there))
    if missing:
        return f"its node lacks {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}"
    for name in sorted(here):
        size, digest = here[name]
        other_size, other_digest = there[name]
        if other_size != size:
            return f"its node's {name} has {other_size} bytes, this server's {size}"
        if other_digest != digest:
            return f"its node's {name} has another safetensors header"
    return None


def is_remote(root_url: str) -> bool:
    """An engine at `root_url` is reached over a network (another node, perhaps another disk)."""
    host = urllib.parse.urlsplit(root_url).hostname or ""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def sight(weights_path: str) -> str:
    """JSON of `{file: [size, sha256 of its safetensors header]}` for the checkpoint's top-level
    files (or the one file it names), or `{"": "<why none>"}`. The engine's copy is
    `engines/engine_worker.checkpoint_sight` (the engine imports nothing of ours); a test holds
    them equal."""
    folder, names = weights_path, []
    try:
        if os.path.isfile(weights_path):  # one file (a weights delta): itself
            folder, names = os.path.split(weights_path)[0], [os.path.basename(weights_path)]
        else:
            names = sorted(name for name in os.listdir(weights_path) if not name.startswith("."))
    except OSError as error:
        return json.dumps({"": f"{type(error).__name__}: {error.strerror or error}"})
    seen: dict[str, list[object]] = {}
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        size = os.path.getsize(path)
        digest = ""
        if name.endswith(".safetensors") and size >= 8:
            with open(path, "rb") as handle:
                head = handle.read(8)
                length = int.from_bytes(head, "little")
                digest = hashlib.sha256(head + handle.read(min(length, 100_000_000))).hexdigest()
        seen[name] = [size, digest]
    return json.dumps(seen, sort_keys=True)
