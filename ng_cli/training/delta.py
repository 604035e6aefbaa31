"""Making a weights delta (`upstream/delta.py` defines the format): only what changed from a base.

    python -m ng_cli.training.delta make --base /ckpt/step-3 --new /ckpt/step-4 --out /ckpt/delta-4

compares every tensor bit for bit and writes only the changed ones: a tensor changed in few
elements as an element patch (flat indices + values), one changed in many (or holding a new NaN,
which an element patch cannot carry) whole, whichever is smaller on disk. The manifest records
the content digest of both checkpoints, so the model server refuses the delta unless its engines
hold the base. `ng_update_weights +path=/ckpt/delta-4 +version=4` applies it.

A trainer that holds its tensors in memory writes the same thing with `write_delta` (its own
diff, its own digests through `TensorDigest`), without writing the full checkpoint.
Standard library only: the model server's environment has no torch (the compare is Python
over memoryviews, about a second per 100M elements changed; unchanged tensors cost one compare).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ng_cli.errors import NgError
from ng_cli.upstream.checkpoint import Checkpoint, CheckpointError
from ng_cli.upstream.delta import (
    FORMAT,
    FORMAT_VERSION,
    ITEM_BYTES,
    MANIFEST,
    TensorDigest,
    tensor_offsets,
)

__all__ = ["Change", "make_delta", "write_delta"]

_NAN_MASKS = {"F32": (32, 0x7F800000, 0x007FFFFF), "BF16": (16, 0x7F80, 0x007F), "F16": (16, 0x7C00, 0x03FF),
              "F64": (64, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}  # fmt: skip
"""dtype -> (bits, exponent mask, mantissa mask): a NaN has every exponent bit and a mantissa bit set."""
_CODES: dict[int, Literal["B", "H", "I", "Q"]] = {1: "B", 2: "H", 4: "I", 8: "Q"}
_BLOCK = 4096
"""Elements compared as one slice before looking inside: unchanged runs cost one compare each."""


@dataclass(frozen=True)
class Change:
    """One changed tensor: `whole` bytes, or `indices` (flat, little-endian `index_dtype`) + `values`."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    whole: bytes | None = None
    indices: bytes | None = None
    values: bytes | None = None
    index_dtype: str = "I64"

    @property
    def count(self) -> int:
        assert self.indices is not None
        return len(self.indices) // ITEM_BYTES[self.index_dtype]


def write_delta(out: str | os.PathLike[str], *, base: str, result: str, changes: Iterable[Change]) -> Path:
    """Write a delta directory at `out` (created; must not hold one already): `base` and `result` are
    the `checkpoint_digest` of the weights it applies onto and of those it gives."""
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / MANIFEST).exists() or any(directory.glob("*.safetensors")):
        raise NgError(f"{directory} holds a checkpoint or delta already: give an empty or new directory")
    header: dict[str, object] = {"__metadata__": {"format": FORMAT}}
    manifest: dict[str, object] = {}
    stored: list[tuple[str, str, Sequence[int], bytes]] = []

    def add(name: str, dtype: str, shape: Sequence[int], data: bytes) -> None:
        stored.append((name, dtype, shape, data))

    for change in changes:
        if change.whole is not None:
            add(change.name, change.dtype, change.shape, change.whole)
            manifest[change.name] = {"kind": "whole", "dtype": change.dtype, "shape": list(change.shape)}
        else:
            assert change.indices is not None
            assert change.values is not None
            add(f"{change.name}:indices", change.index_dtype, [change.count], change.indices)
            add(f"{change.name}:values", change.dtype, [change.count], change.values)
            manifest[change.name] = {
                "kind": "elements",
                "dtype": change.dtype,
                "shape": list(change.shape),
                "count": change.count,
            }
    # Widest dtype first, as safetensors itself writes: every tensor starts at a multiple of its
    # element size (a reader views the bytes in place), and the buffer has no holes.
    stored.sort(key=lambda item: -ITEM_BYTES[item[1]])
    blobs: list[bytes] = []
    offset = 0
    for name, dtype, shape, data in stored:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(directory / "delta.safetensors", "wb") as handle:
        handle.write(len(encoded).to_bytes(8, "little") + encoded)
        for blob in blobs:
            handle.write(blob)
    body = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "base": {"sha256": base},
        "result": {"sha256": result},
        "tensors": manifest,
    }
    (directory / MANIFEST).write_text(json.dumps(body, indent=1) + "\n")
    return directory


def make_delta(
    base: str | os.PathLike[str], new: str | os.PathLike[str], out: str | os.PathLike[str]
) -> dict[str, object]:
    """The delta from checkpoint `base` to checkpoint `new`, written at `out`; a summary of it."""
    old_checkpoint, new_checkpoint = (
        Checkpoint.read(Path(base).absolute()),
        Checkpoint.read(Path(new).absolute()),
    )
    problems = new_checkpoint.differences(old_checkpoint)
    if problems:
        raise CheckpointError(f"{new} is not the same model as {base}:\n  " + "\n  ".join(problems))
    base_digest, new_digest = TensorDigest(), TensorDigest()
    changes: list[Change] = []
    elements = changed_elements = 0
    for name in sorted(new_checkpoint.tensors):
        info = new_checkpoint.tensors[name]
        old = _tensor_bytes(old_checkpoint, name)
        data = _tensor_bytes(new_checkpoint, name)
        base_digest.add(name, info.dtype, info.shape, hashlib.sha256(old).hexdigest())
        new_digest.add(name, info.dtype, info.shape, hashlib.sha256(data).hexdigest())
        item = ITEM_BYTES[info.dtype]
        elements += len(data) // item
        if old == data:
            continue
        change = _change(name, info.dtype, info.shape, old, data)
        changed_elements += (len(data) // item) if change.whole is not None else change.count
        changes.append(change)
    directory = write_delta(out, base=base_digest.hexdigest(), result=new_digest.hexdigest(), changes=changes)
    size = sum(file.stat().st_size for file in directory.iterdir())
    return {
        "out": str(directory),
        "tensors_changed": len(changes),
        "whole": sum(change.whole is not None for change in changes),
        "element_patches": sum(change.whole is None for change in changes),
        "elements_changed": changed_elements,
        "elements": elements,
        "bytes": size,
        "checkpoint_bytes": new_checkpoint.total_bytes,
        "base_sha256": base_digest.hexdigest(),
        "result_sha256": new_digest.hexdigest(),
    }


def _change(name: str, dtype: str, shape: tuple[int, ...], old: bytes, new: bytes) -> Change:
    """The smaller of the whole tensor and an element patch (the patch only for NaN-free floats)."""
    item = ITEM_BYTES[dtype]
    numel = len(new) // item
    if dtype not in _NAN_MASKS:
        return Change(name, dtype, shape, whole=new)
    indices = changed_indices(old, new, item)
    index_dtype = "I32" if numel < 2**31 else "I64"
    if len(indices) * (item + ITEM_BYTES[index_dtype]) >= len(new):
        return Change(name, dtype, shape, whole=new)
    values = b"".join(new[i * item : (i + 1) * item] for i in indices)
    if _holds_nan(values, dtype):
        return Change(name, dtype, shape, whole=new)
    packed = b"".join(i.to_bytes(ITEM_BYTES[index_dtype], "little") for i in indices)
    return Change(name, dtype, shape, indices=packed, values=values, index_dtype=index_dtype)


def changed_indices(old: bytes, new: bytes, item: int) -> list[int]:
    """The flat indices of the elements (`item` bytes each) whose bits differ."""
    code = _CODES[item]
    a, b = memoryview(old).cast(code), memoryview(new).cast(code)
    found: list[int] = []
    for start in range(0, len(a), _BLOCK):
        if a[start : start + _BLOCK] == b[start : start + _BLOCK]:
            continue
        found += [
            start + i
            for i, (x, y) in enumerate(zip(a[start : start + _BLOCK], b[start : start + _BLOCK], strict=True))
            if x != y
        ]
    return found


def _holds_nan(values: bytes, dtype: str) -> bool:
    bits, exponent, mantissa = _NAN_MASKS[dtype]
    view = memoryview(values).cast(_CODES[bits // 8])
    return any((v & exponent) == exponent and (v & mantissa) for v in view)


def _tensor_bytes(checkpoint: Checkpoint, name: str) -> bytes:
    file = checkpoint.path / checkpoint.tensors[name].file
    begin, end = tensor_offsets(file)[name]
    with open(file, "rb") as handle:
        handle.seek(begin)
        data = handle.read(end - begin)
    if len(data) != end - begin:
        raise CheckpointError(f"{file}: truncated inside {name!r}")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m ng_cli.training.delta make --base A --new B --out D`."""
    parser = argparse.ArgumentParser(
        prog="python -m ng_cli.training.delta", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="write the delta from --base to --new at --out")
    make.add_argument("--base", required=True, help="the checkpoint directory the engines hold")
    make.add_argument("--new", required=True, help="the checkpoint directory to serve next")
    make.add_argument("--out", required=True, help="the delta directory to write (new or empty)")
    args = parser.parse_args(argv)
    try:
        summary = make_delta(args.base, args.new, args.out)
    except NgError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
