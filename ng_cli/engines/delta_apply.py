"""Applying a weights delta (`upstream/delta.py` defines the format) onto the weights a worker holds.

Runs inside vLLM's worker process (imported by module name, beside `engine_worker.py`): torch and
the standard library only, nothing from ng_cli, and no vLLM module, so vLLM 0.26 (the GPU build)
and 0.32 (the CPU build) run the same code.

In place, the way vLLM 0.32's `checkpoint_weight_patch` does it (0.26 has no such module): the
model's own `load_weights` maps checkpoint names onto the runtime parameters (fused qkv and
gate_up, TP slices). A whole tensor goes through it as it is. An element patch becomes a
checkpoint-shaped tensor of NaN but at the changed indices, loaded while `torch.Tensor.copy_`
keeps the destination wherever the source is NaN, so a fused parameter's other parts and the
unchanged elements stay. Everything is checked (indices in range and unique, no NaN value)
before the first write. vLLM's layerwise reload is not used for this: it rebuilds every
parameter of a layer it touches, and a fused layer given only its changed part would be left
unprocessed.

The CPU build packs linear layers' weights into its GEMM kernels and keeps empty parameters in
their place, so nothing there can be patched in place. When a changed tensor has no live runtime
parameter, the worker loads the resident weights composed with the delta instead: the full
checkpoint it last loaded, then every delta since, then this one, streamed through vLLM's reload
(`reload`): the result is the same weights, at the cost of a full reload.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Patch", "apply_delta", "read_delta"]

MANIFEST = "ng_delta.json"
_CHUNK_BYTES = 512 << 20
"""Checkpoint-shaped staging bytes per `load_weights` call (one tensor may exceed it)."""


@dataclass
class Patch:
    """One changed checkpoint tensor: `values` whole (indices None), or at flat `indices`."""

    name: str
    shape: tuple[int, ...]
    values: Any
    indices: Any = None


def _dtypes() -> dict[str, Any]:
    import torch

    return {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
            "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
            "BOOL": torch.bool, "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2}  # fmt: skip


def read_safetensors(path: str, device: Any = None) -> dict[str, Any]:
    """Every tensor of one safetensors file: on the CPU, views of a private mapping of the file (pages
    are read where a tensor is used); on `device`, views of one copy of the whole file there (one
    transfer, not one per tensor)."""
    import torch

    dtypes = _dtypes()
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        length = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(length))
    raw = torch.from_file(path, shared=False, size=size, dtype=torch.uint8)[8 + length :]
    if device is not None:
        raw = raw.to(device)
    tensors: dict[str, Any] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = dtypes[entry["dtype"]]
        data = raw[begin:end]
        if (raw.storage_offset() + begin) % dtype.itemsize:  # a writer that did not align: copy, then view
            data = data.clone()
        tensors[name] = data.view(dtype).reshape(entry["shape"])
    return tensors


def read_delta(path: str, device: Any = None) -> list[Patch]:
    """The patches of the delta directory at `path`, on `device` (default: the CPU), checked there;
    ValueError naming what is wrong, before anything is written anywhere."""
    with open(os.path.join(path, MANIFEST)) as handle:
        manifest = json.load(handle)
    stored: dict[str, Any] = {}
    for file in sorted(os.listdir(path)):
        if file.endswith(".safetensors"):
            stored.update(read_safetensors(os.path.join(path, file), device))
    patches: list[Patch] = []
    for name, entry in manifest["tensors"].items():
        shape = tuple(int(n) for n in entry["shape"])
        if entry["kind"] == "whole":
            patches.append(Patch(name, shape, stored[name].reshape(-1)))
        else:
            patches.append(Patch(name, shape, stored[f"{name}:values"], stored[f"{name}:indices"]))
    _check(patches)
    return patches


def _check(patches: list[Patch]) -> None:
    import torch

    for patch in patches:
        numel = math.prod(patch.shape)
        if patch.indices is None:
            if patch.values.numel() != numel:
                raise ValueError(
                    f"{patch.name}: {patch.values.numel()} values for a {list(patch.shape)} tensor"
                )
            continue
        if not patch.values.is_floating_point():
            raise ValueError(
                f"{patch.name}: an element patch needs a floating dtype, not {patch.values.dtype}"
            )
        if patch.indices.numel() != patch.values.numel():
            raise ValueError(
                f"{patch.name}: {patch.indices.numel()} indices for {patch.values.numel()} values"
            )
        if not patch.indices.numel():
            continue
        if bool(torch.isnan(patch.values).any()):
            raise ValueError(f"{patch.name}: an element patch holds NaN (NaN marks unchanged elements)")
        indices = patch.indices.to(torch.int64)
        if int(indices.min()) < 0 or int(indices.max()) >= numel:
            raise ValueError(f"{patch.name}: an index outside its {numel} elements")
        ordered = torch.sort(indices).values
        if bool((ordered[1:] == ordered[:-1]).any()):
            raise ValueError(f"{patch.name}: an index given twice")


def apply_delta(
    model: Any, path: str, resident: list[str], reload: Callable[[Iterator[tuple[str, Any]]], None]
) -> str:
    """Apply the delta at `path`; how ("in place" or "composed reload"). `resident` is what the worker
    holds: the full checkpoint it last loaded, then the deltas applied since, in order."""
    device = next(iter(model.parameters())).device
    patches = read_delta(path, device)
    if _in_place_possible(model, [patch.name for patch in patches]):
        _load_in_place(model, patches)
        return "in place"
    reload(_composed([*resident, path]))
    return "composed reload"


def _in_place_possible(model: Any, names: list[str]) -> bool:
    """Every changed tensor has a live runtime parameter (by its name, or its fused module's)."""
    params = dict(model.named_parameters())
    fused = {
        part: whole
        for whole, parts in (getattr(model, "packed_modules_mapping", None) or {}).items()
        for part in parts
    }
    tied = bool(getattr(getattr(model, "config", None), "tie_word_embeddings", False))
    for name in names:
        module, _, leaf = name.rpartition(".")
        parent, _, last = module.rpartition(".")
        candidates = [name]
        if last in fused:
            candidates.append(f"{parent}.{fused[last]}.{leaf}")
        if tied and name == "lm_head.weight":
            candidates.append("model.embed_tokens.weight")
        found = next((params[c] for c in candidates if c in params), None)
        if found is None or found.numel() == 0:  # the CPU build's packed linear layers
            return False
    return True


def _load_in_place(model: Any, patches: list[Patch]) -> None:
    import torch

    device = next(iter(model.parameters())).device
    whole = [
        (patch.name, patch.values.to(device).view(patch.shape)) for patch in patches if patch.indices is None
    ]
    with torch.no_grad():
        if whole:
            model.load_weights(whole)
        chunk: list[tuple[str, Any]] = []
        size = 0
        for patch in (patch for patch in patches if patch.indices is not None):
            numel = math.prod(patch.shape)
            staged = torch.full((numel,), float("nan"), dtype=patch.values.dtype, device=device)
            if patch.values.numel():
                staged.index_copy_(
                    0, patch.indices.to(device=device, dtype=torch.long), patch.values.to(device)
                )
            chunk.append((patch.name, staged.view(patch.shape)))
            size += staged.numel() * staged.element_size()
            if size >= _CHUNK_BYTES:
                _load_nan_masked(model, chunk)
                chunk, size = [], 0
        if chunk:
            _load_nan_masked(model, chunk)


def _load_nan_masked(model: Any, weights: list[tuple[str, Any]]) -> None:
    """`model.load_weights` where a NaN in the source keeps the destination's value."""
    import torch

    original = torch.Tensor.copy_

    def copy_non_nan_(destination: Any, source: Any, non_blocking: bool = False) -> Any:  # noqa: ARG001 (copy_'s signature)
        if not (
            destination.is_floating_point()
            and source.is_floating_point()
            and destination.shape == source.shape
        ):
            raise NotImplementedError(
                "an element patch needs the model's loader to end in one same-shaped floating-point copy"
            )
        source = source.to(dtype=destination.dtype, device=destination.device)
        return torch.where(torch.isnan(source), destination, source, out=destination)

    torch.Tensor.copy_ = copy_non_nan_
    try:
        model.load_weights(weights)
    finally:
        torch.Tensor.copy_ = original


def _composed(chain: list[str]) -> Iterator[tuple[str, Any]]:
    """The tensors of the full checkpoint `chain[0]` with every delta of `chain[1:]` applied, in order."""
    deltas = [{patch.name: patch for patch in read_delta(path)} for path in chain[1:]]
    full = chain[0]
    for file in sorted(os.listdir(full)):
        if not file.endswith(".safetensors"):
            continue
        for name, tensor in read_safetensors(os.path.join(full, file)).items():
            flat = tensor.reshape(-1)
            for delta in deltas:
                patch = delta.get(name)
                if patch is None:
                    continue
                if patch.indices is None:
                    flat = patch.values.to(flat.dtype).clone()
                else:
                    flat = flat.clone()
                    flat[patch.indices.long()] = patch.values.to(flat.dtype)
            yield name, flat.view(tensor.shape)
