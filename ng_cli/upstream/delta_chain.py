"""`DeltaChain`: the weights deltas the engines hold on top of their last full checkpoint.

A delta (`upstream/delta.py`) is applied onto the resident weights, so the model server must know
what those are, three times over:

* before anything pauses, the delta's base must be them: its manifest's `base.sha256` equal to the
  last delta's `result.sha256`, or, right after a full checkpoint, to that checkpoint's content
  digest (read once per checkpoint, in a thread, and kept: a full read of an 8B checkpoint is
  seconds, paid before the pause, never in the window);
* to roll back or restore a (re)placed engine: reload the full checkpoint, then apply every delta
  since, in order (`load`);
* an engine that cannot patch in place (the CPU build packs its linear layers) rebuilds from the
  same chain (`resident`), so the chain travels with every delta.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ng_cli.upstream.checkpoint import Checkpoint, CheckpointError
from ng_cli.upstream.delta import Delta, DeltaError, checkpoint_digest
from ng_cli.upstream.engine_admin import EngineAdmin

__all__ = ["DeltaChain"]

T = TypeVar("T")


class DeltaChain:
    """The deltas applied since the last full checkpoint, in order, and the identity of the result."""

    def __init__(self, *, check_s: float, digest_s: float) -> None:
        self.check_s = check_s
        self.digest_s = digest_s
        self.deltas: list[str] = []
        self._identity: str | None = None
        """The content digest of the resident weights after the last delta (None: a full checkpoint's,
        computed when a delta needs it)."""
        self._digests: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}

    def resident(self, full: str | None) -> list[str]:
        """What the engines hold: the full checkpoint, then each delta since."""
        return [*([full] if full else []), *self.deltas]

    def loaded_full(self) -> None:
        """A full checkpoint (or a push) replaced the weights: no delta is resident any more."""
        self.deltas = []
        self._identity = None

    def applied(self, delta: Delta) -> None:
        self.deltas.append(str(delta.path))
        self._identity = delta.result

    async def checked(self, path: str, *, full: str | None, model: Callable[[], Checkpoint]) -> Delta:
        """The delta at `path`, if it fits the model (`model()`: the boot checkpoint's headers) and
        its base is the resident weights; DeltaError saying why not."""
        if full is None:
            raise DeltaError(
                "the engines' weights were pushed, not loaded from disk: a delta needs a checkpoint on disk under it "
                "(update from a full checkpoint first)"
            )

        def read() -> Delta:
            delta = Delta.read(path)
            problems = delta.differences(model())
            if problems:
                raise DeltaError(
                    f"{path} does not fit the model the engines serve:\n  " + "\n  ".join(problems)
                )
            return delta

        delta = await self._in_time(path, read, self.check_s, "reading its manifest and headers")
        resident = self._identity
        if resident is None:
            resident = await self._in_time(
                full, lambda: self._digest(full), self.digest_s, "its content digest"
            )
        if delta.base != resident:
            held = f"{full}" + (
                f" + {len(self.deltas)} delta(s), the last {self.deltas[-1]}" if self.deltas else ""
            )
            raise DeltaError(
                f"{path} was made against other weights than the engines hold: its base is {delta.base[:12]}..., "
                f"the engines hold {resident[:12]}... ({held}); make the delta against the weights served now, "
                "or send a full checkpoint"
            )
        return delta

    async def readable(self) -> None:
        """Every delta of the chain is still on disk (a rollback or restore re-applies them)."""
        for path in self.deltas:
            await self._in_time(
                path, functools.partial(Delta.read, path), self.check_s, "reading its manifest"
            )

    async def load(self, admin: EngineAdmin, full: str, *, deadline_s: float) -> list[str]:
        """Put `admin`'s engine on the resident weights: the full checkpoint, then every delta; the
        fingerprint after the last."""
        fingerprint = await admin.reload(full, deadline_s=deadline_s)
        for i, delta in enumerate(self.deltas):
            fingerprint = await admin.apply_delta(delta, [full, *self.deltas[:i]], deadline_s=deadline_s)
        return fingerprint

    def _digest(self, full: str) -> str:
        files = sorted(Path(full).glob("*.safetensors"))
        key = (os.path.realpath(full), tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files))
        if key not in self._digests:
            self._digests[key] = checkpoint_digest(full)
        return self._digests[key]

    @staticmethod
    async def _in_time(path: str, read: Callable[[], T], deadline_s: float, what: str) -> T:
        try:
            return await asyncio.wait_for(asyncio.to_thread(read), deadline_s)
        except TimeoutError:
            raise CheckpointError(
                f"{path}: {what} took over {deadline_s:g} s: is its file system stalled?"
            ) from None
