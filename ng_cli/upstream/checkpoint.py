"""`Checkpoint`: what a safetensors checkpoint directory holds, read from its headers only.

A weight update is refused before any engine is paused when the new checkpoint cannot be what
the engines run: no such directory, no `*.safetensors` file, a file whose header is not a
safetensors header (garbage bytes, a truncated file), or tensors whose names, dtypes or shapes
differ from the checkpoint the engines run now. Reading a header costs one small read per file
(8 bytes of length, then JSON), so even an 8B checkpoint is checked in milliseconds; the tensor
bytes are the engine's to read.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ng_cli.errors import NgError

__all__ = ["Checkpoint", "CheckpointError", "CheckpointGate", "TensorInfo"]

T = TypeVar("T")

_MAX_HEADER_BYTES = 100 * 1024 * 1024
"""safetensors' own limit on the JSON header."""


class CheckpointError(NgError):
    """A checkpoint directory that no engine could load as the model it serves."""

    exit_code = 2
    http_status = 422


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]
    file: str


@dataclass(frozen=True)
class Checkpoint:
    """A directory of safetensors files and the tensors their headers declare."""

    path: Path
    tensors: dict[str, TensorInfo]
    total_bytes: int

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """The checkpoint at `path` (an absolute directory), or CheckpointError saying what is wrong."""
        directory = Path(path)
        if not directory.is_absolute():
            raise CheckpointError(
                f"checkpoint path {str(path)!r} is not absolute (engines resolve it on their own)"
            )
        if not directory.is_dir():
            what = "does not exist" if not directory.exists() else "is not a directory"
            raise CheckpointError(f"checkpoint {directory} {what}")
        files = sorted(directory.glob("*.safetensors"))
        if not files:
            raise CheckpointError(f"checkpoint {directory} holds no *.safetensors file")
        tensors: dict[str, TensorInfo] = {}
        total = 0
        for file in files:
            for name, info in _header(file).items():
                if name in tensors:
                    raise CheckpointError(
                        f"checkpoint {directory}: tensor {name!r} is in {tensors[name].file} and {file.name}"
                    )
                tensors[name] = info
            total += file.stat().st_size
        return cls(path=directory, tensors=tensors, total_bytes=total)

    def differences(self, reference: Checkpoint, *, limit: int = 5) -> list[str]:
        """Why this checkpoint cannot replace `reference` in the same model (empty: it can)."""
        problems: list[str] = []
        missing = sorted(set(reference.tensors) - set(self.tensors))
        extra = sorted(set(self.tensors) - set(reference.tensors))
        if missing:
            problems.append(f"{len(missing)} tensor(s) missing, e.g. {', '.join(missing[:limit])}")
        if extra:
            problems.append(
                f"{len(extra)} tensor(s) the model does not have, e.g. {', '.join(extra[:limit])}"
            )
        for name in sorted(set(self.tensors) & set(reference.tensors)):
            new, old = self.tensors[name], reference.tensors[name]
            if new.shape != old.shape or new.dtype != old.dtype:
                problems.append(
                    f"{name}: {new.dtype}{list(new.shape)} where the model has {old.dtype}{list(old.shape)}"
                )
            if len(problems) >= limit + 2:
                break
        return problems


class CheckpointGate:
    """The check an update runs first: headers read in a worker thread, under `check_s`, so a file
    whose read blocks (a stalled network file system) never stops the event loop and its calls."""

    def __init__(self, *, check_s: float) -> None:
        self.check_s = check_s
        self._reference: Checkpoint | None = None
        """The checkpoint the model started from (read once: its names, dtypes and shapes never change)."""

    async def checked(self, path: str, reference: str | None) -> Checkpoint:
        """The checkpoint at `path`, if it can replace `reference` in the same model."""
        checkpoint, model = await self._in_time(path, lambda: self._read_both(path, reference))
        problems = checkpoint.differences(model)
        if problems:
            raise CheckpointError(
                f"{path} does not fit the model the engines serve:\n  " + "\n  ".join(problems)
            )
        return checkpoint

    async def readable(self, path: str) -> None:
        """The checkpoint at `path` is still there and readable."""
        await self._in_time(path, lambda: Checkpoint.read(path))

    def _read_both(self, path: str, reference: str | None) -> tuple[Checkpoint, Checkpoint]:
        checkpoint = Checkpoint.read(path)
        return checkpoint, self.model(reference)

    def model(self, reference: str | None) -> Checkpoint:
        """The headers of the checkpoint the model started from (`reference` read the first time; blocking)."""
        if self._reference is None:
            if reference is None:
                raise CheckpointError(
                    "no checkpoint on disk to compare with (the engines' weights were pushed)"
                )
            self._reference = Checkpoint.read(reference)
        return self._reference

    async def _in_time(self, path: str, read: Callable[[], T]) -> T:
        try:
            return await asyncio.wait_for(asyncio.to_thread(read), self.check_s)
        except TimeoutError:
            raise CheckpointError(
                f"reading the headers of {path} took over {self.check_s:g} s (check_s): is its file system stalled?"
            ) from None


def _header(file: Path) -> dict[str, TensorInfo]:
    """The tensors one safetensors file declares, with the file's size checked against them."""
    try:
        info = file.stat()
    except OSError as exc:
        raise CheckpointError(f"{file}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block the read, or never end
        raise CheckpointError(f"{file}: not a regular file (a FIFO, device or socket)")
    size = info.st_size
    try:
        with open(file, "rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise CheckpointError(f"{file}: {size} bytes, too short for a safetensors file")
            (length,) = struct.unpack("<Q", prefix)
            if length > min(_MAX_HEADER_BYTES, size - 8):
                raise CheckpointError(
                    f"{file}: not a safetensors file (header length {length} in a {size}-byte file)"
                )
            header = json.loads(handle.read(length))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{file}: not a safetensors file (its header is not JSON: {exc})") from None
    except RecursionError:
        raise CheckpointError(f"{file}: not a safetensors file (its header nests too deep)") from None
    except OSError as exc:
        raise CheckpointError(f"{file}: cannot be read ({exc.strerror})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{file}: not a safetensors file (its header is not a JSON object)")
    tensors: dict[str, TensorInfo] = {}
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, stop) = (
                entry["dtype"],
                tuple(int(n) for n in entry["shape"]),
                entry["data_offsets"],
            )
        except (TypeError, KeyError, ValueError) as exc:
            raise CheckpointError(f"{file}: tensor {name!r} has a malformed header entry ({exc})") from None
        if not (isinstance(begin, int) and isinstance(stop, int) and 0 <= begin <= stop):
            raise CheckpointError(f"{file}: tensor {name!r} has bad data offsets {entry['data_offsets']}")
        tensors[name] = TensorInfo(dtype=str(dtype), shape=shape, file=file.name)
        end = max(end, stop)
    if 8 + length + end > size:
        raise CheckpointError(
            f"{file}: truncated: its header declares {8 + length + end} bytes, the file has {size}"
        )
    return tensors
