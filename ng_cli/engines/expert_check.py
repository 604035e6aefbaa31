"""The experts one engine rank holds, compared with what the checkpoint's files hold for that rank.

Under expert parallelism each rank holds its own experts, so the ranks' fingerprints cannot be
compared with each other; the part they share is (`upstream/engine_admin.shared_part`). This
module checks the rest against the files: for every MoE layer (a module with vLLM's `w13_weight`
and `w2_weight`, `RoutedExperts` in vLLM 0.26 and 0.32), the global expert ids this rank holds
(its `_expert_map`: global id -> local slot, -1 elsewhere; none without EP: every expert), each
read from the safetensors files (only those tensors) and compared exactly with the resident
slot: w13 is the gate projection's rows then the up projection's, w2 the down projection (each
narrowed to this rank's tensor-parallel part).

Kernels that repack weights keep each expert's values but not their order (the CPU build's
prepack, FlashInfer's up-before-gate): a slot that is not equal in vLLM's layout is then
compared as the multiset of its values (both sorted), and the result counts it apart. A layout
that changes the count or the dtype (padding, quantization), EPLB's moving experts, or names the
files do not hold leave the rank unchecked, with the reason in the result; nothing is guessed.

Cost: a second read of this rank's experts. All of them while they fit `budget_bytes`; above it
a sample of every layer's experts, rotated by `seed` (the update's version), so successive
updates cover different experts.

Runs inside the engine, imported by name beside `engine_worker.py`: the standard library, torch
and safetensors (both vLLM's own dependencies), nothing from ng_cli.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

__all__ = ["ExpertMismatchError", "check_experts", "checkpoint_names", "held_experts"]


class ExpertMismatchError(ValueError):
    """A rank's experts differ from the checkpoint's; the message names the rank, layers and experts."""


def check_experts(model: Any, weights_path: str, *, budget_bytes: int, seed: int = 0) -> dict[str, Any]:
    """Compare this rank's experts with the files in `weights_path`; a summary, or ExpertMismatchError."""
    started = time.perf_counter()
    layers = [(name, module) for name, module in model.named_modules() if _is_expert_layer(module)]
    result: dict[str, Any] = {"layers": len(layers), "held": 0, "checked": 0, "exact": 0, "as_multiset": 0,
                              "sampled": False, "bytes_read": 0, "seconds": 0.0, "unchecked": None}  # fmt: skip
    if not layers:
        result["unchecked"] = "the model has no expert layers"
        return result
    result.update(_ranks(layers[0][1]))
    for name, layer in layers:
        reason = _uncheckable(layer)
        if reason is not None:
            result["unchecked"] = f"{_prefix(name, layer)}: {reason}"
            return result
    plans = [(_prefix(name, layer), layer, held_experts(layer)) for name, layer in layers]
    per_expert = max(_slot_bytes(layer) for _, layer, _ in plans)
    result["held"] = sum(len(experts) for _, _, experts in plans)
    result["held_ids"] = [expert for expert, _ in plans[0][2]]  # the first layer's: placement is per rank
    result["sampled"] = result["held"] * per_expert > budget_bytes
    take = max(1, budget_bytes // max(1, per_expert * len(plans)))
    reader = _Reader(Path(weights_path))
    mismatches: list[str] = []
    try:
        for prefix, layer, experts in plans:
            chosen = _sample(experts, take, seed) if result["sampled"] else experts
            for global_id, local_id in chosen:
                verdict = _check_expert(layer, prefix, global_id, local_id, reader, result)
                if verdict is None:
                    return result
                if verdict.startswith("differs"):
                    mismatches.append(f"{prefix} expert {global_id} ({verdict.removeprefix('differs ')})")
                else:
                    result[verdict] += 1
                result["checked"] += 1
    finally:
        reader.close()
        result["seconds"] = round(time.perf_counter() - started, 4)
    if mismatches:
        raise ExpertMismatchError(
            f"EP rank {result['ep_rank']} of {result['ep_size'] or 1}: {len(mismatches)} of {result['checked']} "
            "checked experts differ from the checkpoint's files: "
            + ", ".join(mismatches[:5])
            + (f" and {len(mismatches) - 5} more" if len(mismatches) > 5 else "")
        )
    return result


def _check_expert(
    layer: Any, prefix: str, global_id: int, local_id: int, reader: _Reader, result: dict[str, Any]
) -> str | None:
    """`exact`, `as_multiset` or `differs w13, w2` for one expert; None (the reason in `result`)
    when it cannot be compared."""
    expected = _expected(layer, prefix, global_id, reader)
    if isinstance(expected, str):
        result["unchecked"] = expected
        return None
    verdicts = {}
    for which, want in zip(("w13", "w2"), expected, strict=True):
        result["bytes_read"] += want.numel() * want.element_size()
        got = getattr(layer, f"{which}_weight")[local_id]
        verdict = _compare(got, want)
        if verdict is None:
            result["unchecked"] = (
                f"{prefix} {which}: resident {tuple(got.shape)} {got.dtype}, files {tuple(want.shape)} "
                f"{want.dtype} (a kernel's layout: padded or quantized)"
            )
            return None
        verdicts[which] = verdict
    differ = [which for which, verdict in verdicts.items() if verdict == "differs"]
    if differ:
        return f"differs {', '.join(differ)}"
    return "exact" if set(verdicts.values()) == {"exact"} else "as_multiset"


class _Reader:
    """The checkpoint's tensors by name, each file opened once (`safetensors.safe_open`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.names = checkpoint_names(directory)
        self._open: dict[str, Any] = {}

    def piece(self, name: str) -> Any:
        """A lazy slice of one tensor (read when indexed)."""
        from safetensors import safe_open

        file = self.names[name]
        if file not in self._open:
            self._open[file] = safe_open(str(self.directory / file), framework="pt", device="cpu")
        return self._open[file].get_slice(name)

    def close(self) -> None:
        self._open.clear()


def held_experts(layer: Any) -> list[tuple[int, int]]:
    """(global expert id, local slot) of every expert this rank holds, in global order."""
    mapping = getattr(layer, "_expert_map", None)
    if mapping is None:
        count = int(layer.w13_weight.shape[0])
        return [(expert, expert) for expert in range(count)]
    return [(expert, int(slot)) for expert, slot in enumerate(mapping.tolist()) if int(slot) >= 0]


def checkpoint_names(directory: Path) -> dict[str, str]:
    """Tensor name -> the safetensors file that holds it (the index when there is one, else every
    file's header, read with the standard library: 8 bytes of length, then JSON)."""
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        return {str(name): str(file) for name, file in weight_map.items()}
    names: dict[str, str] = {}
    for file in sorted(directory.glob("*.safetensors")):
        with open(file, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        names.update({name: file.name for name in header if name != "__metadata__"})
    return names


def _is_expert_layer(module: Any) -> bool:
    return all(hasattr(module, attr) for attr in ("w13_weight", "w2_weight", "global_num_experts"))


def _prefix(name: str, layer: Any) -> str:
    """The layer's checkpoint prefix (`model.layers.0.mlp.experts`): vLLM's `layer_name`."""
    return str(getattr(layer, "layer_name", None) or name.removesuffix(".routed_experts"))


def _parallel(layer: Any) -> Any:
    return getattr(getattr(layer, "moe_config", None), "moe_parallel_config", None)


def _ranks(layer: Any) -> dict[str, int]:
    config = _parallel(layer)
    return {
        key: int(getattr(config, key, 0) or 0)
        for key in ("ep_rank", "ep_size", "dp_rank", "tp_rank", "tp_size")
    }


def _uncheckable(layer: Any) -> str | None:
    config = _parallel(layer)
    if getattr(config, "enable_eplb", False):
        return "EPLB moves experts between ranks"
    if getattr(layer, "is_fused_checkpoint_transposed", False):
        return "its checkpoint stores the experts fused"
    if layer.w13_weight.dim() != 3 or layer.w2_weight.dim() != 3:
        return f"w13_weight of {layer.w13_weight.dim()} dimensions, not [experts, rows, columns]"
    if not layer.w13_weight.is_floating_point() or layer.w13_weight.element_size() < 2:
        return f"quantized experts ({layer.w13_weight.dtype})"
    return None


def _slot_bytes(layer: Any) -> int:
    return sum(int(w[0].numel()) * int(w.element_size()) for w in (layer.w13_weight, layer.w2_weight))


def _sample(experts: list[tuple[int, int]], take: int, seed: int) -> list[tuple[int, int]]:
    """`take` of `experts`, consecutive from an offset that moves by `take` with each seed."""
    if take >= len(experts):
        return experts
    start = (seed * take) % len(experts)
    return [experts[(start + index) % len(experts)] for index in range(take)]


def _expected(layer: Any, prefix: str, expert: int, reader: _Reader) -> Any:
    """(w13, w2) of one expert as the files hold them for this rank, or why they cannot be read."""
    import torch

    gate = getattr(layer, "ckpt_gate_proj_name", None) or "gate_proj"
    down = getattr(layer, "ckpt_down_proj_name", None) or "down_proj"
    up = getattr(layer, "ckpt_up_proj_name", "up_proj")
    names = [f"{prefix}.{expert}.{part}.weight" for part in (gate, *([up] if up else []), down)]
    missing = [name for name in names if name not in reader.names]
    if missing:
        return (
            f"the files in {reader.directory} hold no {missing[0]} (vLLM loaded this layer from other names)"
        )
    ranks = _ranks(layer)
    tp_size, tp_rank = max(1, ranks["tp_size"]), ranks["tp_rank"]
    tensors = []
    for name in names:
        piece = reader.piece(name)
        is_down = name.endswith(f".{down}.weight")  # gate and up: this rank's rows; down: its columns
        size = piece.get_shape()[1 if is_down else 0] // tp_size
        lo, hi = tp_rank * size, (tp_rank + 1) * size
        tensors.append(piece[:, lo:hi] if is_down else piece[lo:hi])
    return torch.cat(tensors[:-1], dim=0), tensors[-1]


def _compare(got: Any, want: Any) -> str | None:
    """`exact`, `as_multiset`, `differs`, or None when the two cannot be compared."""
    import torch

    if got.numel() != want.numel():
        return None
    want = want.to(device=got.device, dtype=got.dtype)
    if got.shape == want.shape and torch.equal(got, want):
        return "exact"
    if torch.equal(got.reshape(-1).sort().values, want.reshape(-1).sort().values):
        return "as_multiset"
    return "differs"
