"""`Delta`: a weights delta on disk (only what changed since a base checkpoint), read and checked.

Between two RL steps about 99% of bf16 weights are bit-identical, so a delta carries 1-3% of a
checkpoint's bytes. A delta is a directory:

    ng_delta.json        the manifest (below): it names the folder a delta and the weights it applies onto
    *.safetensors        the changed values: a tensor changed everywhere under its checkpoint name;
                         a tensor changed in a few elements as `<name>:indices` (I32 or I64, 1-D,
                         flat indices into the tensor) and `<name>:values` (its dtype, 1-D)

    {"format": "ng_cli.weights_delta", "format_version": 1,
     "base":   {"sha256": "<checkpoint_digest of the weights it applies onto>"},
     "result": {"sha256": "<checkpoint_digest of the weights it gives>"},
     "tensors": {"model.norm.weight": {"kind": "whole", "dtype": "BF16", "shape": [4096]},
                 "model.embed_tokens.weight": {"kind": "elements", "dtype": "BF16",
                                                "shape": [128256, 4096], "count": 10496}}}

Identity is content (`checkpoint_digest`: sha256 over every tensor's name, dtype, shape and bytes,
whatever the sharding), so a delta made against other weights than the engines hold is refused
before anything pauses. Element patches need a floating dtype: the engine marks unchanged elements
with NaN (`engines/delta_apply.py`), so a NaN cannot be a patched value either. Everything here
reads headers and the manifest only, except `checkpoint_digest`, which reads every byte once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ng_cli.upstream.checkpoint import Checkpoint, CheckpointError, TensorInfo, _header

__all__ = [
    "FLOAT_DTYPES",
    "FORMAT",
    "FORMAT_VERSION",
    "INDEX_DTYPES",
    "MANIFEST",
    "Delta",
    "DeltaError",
    "DeltaTensor",
    "TensorDigest",
    "checkpoint_digest",
    "is_delta",
    "tensor_offsets",
]

FORMAT = "ng_cli.weights_delta"
FORMAT_VERSION = 1
MANIFEST = "ng_delta.json"
FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"})
INDEX_DTYPES = frozenset({"I32", "I64"})
ITEM_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4,
              "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}  # fmt: skip
_SHA256 = re.compile(r"[0-9a-f]{64}")
_READ_BYTES = 16 << 20


class DeltaError(CheckpointError):
    """A delta directory that cannot be applied to the model the engines serve."""


@dataclass(frozen=True)
class DeltaTensor:
    """One changed checkpoint tensor: whole (every value), or `count` elements of it."""

    name: str
    kind: str
    dtype: str
    shape: tuple[int, ...]
    count: int


@dataclass(frozen=True)
class Delta:
    """A delta directory: what it applies onto, what it gives, and which tensors change."""

    path: Path
    base: str
    result: str
    tensors: dict[str, DeltaTensor]
    total_bytes: int

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Delta:
        """The delta at `path` (an absolute directory), or DeltaError naming the file and key."""
        directory = Path(path)
        if not directory.is_absolute():
            raise DeltaError(f"delta path {str(path)!r} is not absolute (engines resolve it on their own)")
        manifest = directory / MANIFEST
        tensors, base, result = _manifest(manifest)
        files = sorted(directory.glob("*.safetensors"))
        stored: dict[str, TensorInfo] = {}
        for file in files:
            for name, info in _header(file).items():
                if name in stored:
                    raise DeltaError(f"delta {directory}: {name!r} is in {stored[name].file} and {file.name}")
                stored[name] = info
        expected: dict[str, tuple[str, tuple[int, ...]]] = {}
        for tensor in tensors.values():
            if tensor.kind == "whole":
                expected[tensor.name] = (tensor.dtype, tensor.shape)
            else:
                expected[f"{tensor.name}:values"] = (tensor.dtype, (tensor.count,))
                stored_index = stored.get(f"{tensor.name}:indices")
                expected[f"{tensor.name}:indices"] = (
                    stored_index.dtype
                    if stored_index is not None and stored_index.dtype in INDEX_DTYPES
                    else "I64",
                    (tensor.count,),
                )
        for name, (dtype, shape) in expected.items():
            found = stored.get(name)
            if found is None:
                raise DeltaError(
                    f"delta {directory}: {MANIFEST} lists {name.partition(':')[0]!r} but no *.safetensors file "
                    f"holds {name!r}"
                )
            if (found.dtype, found.shape) != (dtype, shape):
                want = "I32 or I64" if name.endswith(":indices") else dtype
                raise DeltaError(
                    f"delta {directory}: {found.file}: {name!r} is {found.dtype}{list(found.shape)}, "
                    f"{MANIFEST} says {want}{list(shape)}"
                )
        extra = sorted(set(stored) - set(expected))
        if extra:
            raise DeltaError(
                f"delta {directory}: {len(extra)} tensor(s) in its files that {MANIFEST} does not list, "
                f"e.g. {', '.join(extra[:3])}"
            )
        total = manifest.stat().st_size + sum(file.stat().st_size for file in files)
        return cls(path=directory, base=base, result=result, tensors=tensors, total_bytes=total)

    def differences(self, model: Checkpoint, *, limit: int = 5) -> list[str]:
        """Why this delta cannot apply to `model`'s tensors (names, dtypes, shapes; empty: it can)."""
        problems: list[str] = []
        for name, tensor in sorted(self.tensors.items()):
            info = model.tensors.get(name)
            if info is None:
                problems.append(f"{name}: the model has no such tensor")
            elif (info.dtype, info.shape) != (tensor.dtype, tensor.shape):
                problems.append(
                    f"{name}: {tensor.dtype}{list(tensor.shape)} where the model has {info.dtype}{list(info.shape)}"
                )
            if len(problems) >= limit:
                break
        return problems


def is_delta(path: str | os.PathLike[str]) -> bool:
    """True when `path` is a delta directory (it holds the manifest), not a full checkpoint."""
    return (Path(path) / MANIFEST).is_file()


def _manifest(file: Path) -> tuple[dict[str, DeltaTensor], str, str]:
    try:
        raw = json.loads(file.read_text())
    except OSError as exc:
        raise DeltaError(f"{file}: cannot be read ({exc.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DeltaError(f"{file}: not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise DeltaError(f"{file}: not a JSON object")
    if raw.get("format") != FORMAT:
        raise DeltaError(f"{file}: format is {raw.get('format')!r}, expected {FORMAT!r}")
    if raw.get("format_version") != FORMAT_VERSION:
        raise DeltaError(
            f"{file}: format_version {raw.get('format_version')!r} is not supported (this ng_cli reads {FORMAT_VERSION})"
        )
    digests = [_digest_of(file, raw, key) for key in ("base", "result")]
    entries = raw.get("tensors")
    if not isinstance(entries, dict):
        raise DeltaError(f"{file}: tensors must be an object of tensor name -> its change")
    tensors = {name: _tensor(file, name, entry) for name, entry in entries.items()}
    return tensors, digests[0], digests[1]


def _digest_of(file: Path, raw: dict[str, Any], key: str) -> str:
    value = raw.get(key)
    digest = value.get("sha256") if isinstance(value, dict) else None
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise DeltaError(
            f"{file}: {key}.sha256 must be 64 lowercase hex digits (checkpoint_digest), got {digest!r}"
        )
    return digest


def _tensor(file: Path, name: str, entry: Any) -> DeltaTensor:
    where = f"{file}: tensors.{name}"
    if not name or ":" in name:
        raise DeltaError(f"{where}: not a checkpoint tensor name")
    if not isinstance(entry, dict):
        raise DeltaError(f"{where}: must be an object with kind, dtype, shape")
    kind, dtype, shape = entry.get("kind"), entry.get("dtype"), entry.get("shape")
    if kind not in ("whole", "elements"):
        raise DeltaError(f"{where}.kind: {kind!r}, expected 'whole' or 'elements'")
    if not isinstance(dtype, str) or dtype not in ITEM_BYTES:
        raise DeltaError(f"{where}.dtype: {dtype!r} is not a safetensors dtype")
    if not (
        isinstance(shape, list)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        raise DeltaError(f"{where}.shape: {shape!r} is not a list of non-negative integers")
    count = 0
    if kind == "elements":
        if dtype not in FLOAT_DTYPES:
            raise DeltaError(
                f"{where}: an element patch of a {dtype} tensor: element patches need a floating dtype "
                "(the engine marks unchanged elements with NaN); store the tensor whole"
            )
        given = entry.get("count")
        size = 1
        for n in shape:
            size *= n
        if not isinstance(given, int) or isinstance(given, bool) or not 0 <= given <= size:
            raise DeltaError(f"{where}.count: {given!r} is not an element count from 0 to {size}")
        count = given
    return DeltaTensor(name=name, kind=kind, dtype=dtype, shape=tuple(shape), count=count)


class TensorDigest:
    """`checkpoint_digest` built tensor by tensor, in any order (a trainer hashes what it holds)."""

    def __init__(self) -> None:
        self._tensors: dict[str, str] = {}

    def add(self, name: str, dtype: str, shape: tuple[int, ...] | list[int], data_sha256: str) -> None:
        """One tensor, by the sha256 of its raw little-endian bytes."""
        self._tensors[name] = f"{name}\0{dtype}\0{','.join(str(int(n)) for n in shape)}\0{data_sha256}\n"

    def hexdigest(self) -> str:
        combined = hashlib.sha256()
        for name in sorted(self._tensors):
            combined.update(self._tensors[name].encode())
        return combined.hexdigest()


def checkpoint_digest(path: str | os.PathLike[str]) -> str:
    """The content identity of a full checkpoint directory: every tensor's name, dtype, shape and
    bytes (one read of every file; sharding and file names do not change it)."""
    checkpoint = Checkpoint.read(path)
    digest = TensorDigest()
    for file_name, names in _by_file(checkpoint).items():
        file = checkpoint.path / file_name
        offsets = tensor_offsets(file)
        with open(file, "rb", buffering=0) as handle:
            for name in names:
                begin, end = offsets[name]
                handle.seek(begin)
                data = hashlib.sha256()
                left = end - begin
                while left:
                    chunk = handle.read(min(left, _READ_BYTES))
                    if not chunk:
                        raise CheckpointError(f"{file}: truncated inside {name!r}")
                    data.update(chunk)
                    left -= len(chunk)
                info = checkpoint.tensors[name]
                digest.add(name, info.dtype, info.shape, data.hexdigest())
    return digest.hexdigest()


def _by_file(checkpoint: Checkpoint) -> dict[str, list[str]]:
    files: dict[str, list[str]] = {}
    for name, info in checkpoint.tensors.items():
        files.setdefault(info.file, []).append(name)
    return files


def tensor_offsets(file: Path) -> dict[str, tuple[int, int]]:
    """Each tensor's absolute byte range in `file` (the header was checked by `Checkpoint.read`)."""
    with open(file, "rb") as handle:
        length = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(length))
    return {
        name: (8 + length + entry["data_offsets"][0], 8 + length + entry["data_offsets"][1])
        for name, entry in header.items()
        if name != "__metadata__"
    }
