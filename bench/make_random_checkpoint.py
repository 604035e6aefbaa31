"""Write a real safetensors checkpoint of random values for a Llama- or Qwen3-MoE-shaped config directory.

    python bench/make_random_checkpoint.py --config-dir /tmp/ng-models/llama3-8b-shape \
        --out /tmp/ng-ckpt/A --seed 1 [--shard-gb 4] [--std 0.02]

The config directory is what `ng_cli/toolchain/tiny_model.py --arch llama3-8b --out DIR` writes
(config, tokenizer and chat template, no weights: vLLM serves it with `load_format: dummy`). A
weight update needs weights on disk (`dummy` cannot be reloaded), so this writes them: every
tensor of transformers' `LlamaForCausalLM` state dict (the names vLLM's Llama loader reads),
bf16, drawn on the GPU from N(0, std) (the RMSNorm weights from 1 + N(0, std), as a trained
model's are near 1), sharded like a Hugging Face checkpoint (`model-0000i-of-0000n.safetensors`
of about `--shard-gb` GB each, plus `model.safetensors.index.json`). The config, tokenizer and
generation config are copied beside, so the directory is also a model vLLM can boot from.
A Qwen3-MoE config (`tiny_model.py --experts 16`, the shape of moe_dp2_ep2.yaml) gets the tensors
of transformers' `Qwen3MoeForCausalLM` (per-expert gate/up/down projections, the router
`mlp.gate`, q/k norms), in the config's dtype, so an expert-parallel engine's reload reads each
rank's own experts from real files.
Two seeds give two checkpoints of the same shapes and different values (A and B of
`bench/weight_update_8b.py`). Every file is read back with `safetensors.safe_open`: names,
shapes, dtype, and one tensor's values.

With `--changed-from A --fraction F --delta-out D` it writes instead B' = A with a fraction F of
every tensor's elements changed (x * 1.0625 + 0.001 in the tensor's dtype, drawn per tensor),
sharded and named as A, and the weights delta from A to B' at D in ng_cli's format
(`ng_cli/upstream/delta.py`: `ng_delta.json` with both checkpoints' content digests, element
patches `<name>:indices` / `<name>:values`, a tensor stored whole where that is smaller): what an
RL step's few changed bf16 values look like, for `bench/weight_delta.py`.

Runs under any python with torch (CUDA when there is a GPU, else CPU, slowly) and safetensors;
imports nothing from ng_cli (the delta format is written here; ng_cli's model server reads and
checks it before any engine pauses).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

COPIED = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)


def llama_shapes(config: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every tensor of LlamaForCausalLM's state dict, in layer order."""
    hidden = int(config["hidden_size"])
    inter = int(config["intermediate_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    vocab = int(config["vocab_size"])
    shapes: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(int(config["num_hidden_layers"])):
        p = f"model.layers.{i}."
        shapes += [
            (p + "input_layernorm.weight", (hidden,)),
            (p + "self_attn.q_proj.weight", (heads * head_dim, hidden)),
            (p + "self_attn.k_proj.weight", (kv_heads * head_dim, hidden)),
            (p + "self_attn.v_proj.weight", (kv_heads * head_dim, hidden)),
            (p + "self_attn.o_proj.weight", (hidden, heads * head_dim)),
            (p + "post_attention_layernorm.weight", (hidden,)),
            (p + "mlp.gate_proj.weight", (inter, hidden)),
            (p + "mlp.up_proj.weight", (inter, hidden)),
            (p + "mlp.down_proj.weight", (hidden, inter)),
        ]
    shapes.append(("model.norm.weight", (hidden,)))
    if not config.get("tie_word_embeddings", False):
        shapes.append(("lm_head.weight", (vocab, hidden)))
    return shapes


def qwen3_moe_shapes(config: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every tensor of Qwen3MoeForCausalLM's state dict (every layer sparse)."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    vocab = int(config["vocab_size"])
    experts = int(config.get("num_experts") or config["num_local_experts"])
    inter = int(config["moe_intermediate_size"])
    if config.get("mlp_only_layers") or int(config.get("decoder_sparse_step", 1)) != 1:
        raise SystemExit("only Qwen3-MoE configs with every layer sparse are supported")
    shapes: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(int(config["num_hidden_layers"])):
        p = f"model.layers.{i}."
        shapes += [
            (p + "input_layernorm.weight", (hidden,)),
            (p + "self_attn.q_proj.weight", (heads * head_dim, hidden)),
            (p + "self_attn.k_proj.weight", (kv_heads * head_dim, hidden)),
            (p + "self_attn.v_proj.weight", (kv_heads * head_dim, hidden)),
            (p + "self_attn.o_proj.weight", (hidden, heads * head_dim)),
            (p + "self_attn.q_norm.weight", (head_dim,)),
            (p + "self_attn.k_norm.weight", (head_dim,)),
            (p + "post_attention_layernorm.weight", (hidden,)),
            (p + "mlp.gate.weight", (experts, hidden)),
        ]
        for e in range(experts):
            shapes += [
                (p + f"mlp.experts.{e}.gate_proj.weight", (inter, hidden)),
                (p + f"mlp.experts.{e}.up_proj.weight", (inter, hidden)),
                (p + f"mlp.experts.{e}.down_proj.weight", (hidden, inter)),
            ]
    shapes.append(("model.norm.weight", (hidden,)))
    if not config.get("tie_word_embeddings", False):
        shapes.append(("lm_head.weight", (vocab, hidden)))
    return shapes


SHAPES = {"llama": llama_shapes, "qwen3_moe": qwen3_moe_shapes}
DTYPES = {"float32": ("float32", "F32", 4), "bfloat16": ("bfloat16", "BF16", 2)}


def shapes_of(config: dict[str, Any], where: Path) -> list[tuple[str, tuple[int, ...]]]:
    kind = config.get("model_type")
    if kind not in SHAPES:
        raise SystemExit(f"{where}: model_type {kind!r}, expected one of {sorted(SHAPES)}")
    return SHAPES[kind](config)


def dtype_of(config: dict[str, Any]) -> tuple[str, str, int]:
    """(torch name, safetensors name, bytes) of the config's dtype; bf16 unless it says float32."""
    return DTYPES[
        "float32" if (config.get("dtype") or config.get("torch_dtype")) == "float32" else "bfloat16"
    ]


def numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def shard_plan(
    shapes: list[tuple[str, tuple[int, ...]]], shard_bytes: int, item_bytes: int = 2
) -> list[list[tuple[str, tuple[int, ...]]]]:
    shards: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for name, shape in shapes:
        nbytes = numel(shape) * item_bytes
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, shape))
        size += nbytes
    return shards


def write(config_dir: Path, out: Path, *, seed: int, std: float, shard_gb: float) -> dict[str, Any]:
    import torch
    from safetensors.torch import save_file

    config = json.loads((config_dir / "config.json").read_text())
    shapes = shapes_of(config, config_dir)
    dtype_name, _, item_bytes = dtype_of(config)
    dtype = getattr(torch, dtype_name)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shards = shard_plan(shapes, int(shard_gb * 1e9), item_bytes)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.safetensors"):
        old.unlink()
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    weight_map: dict[str, str] = {}
    total = 0
    started = time.perf_counter()
    timings = {"generate_s": 0.0, "to_cpu_s": 0.0, "save_s": 0.0}
    for index, shard in enumerate(shards, start=1):
        file = f"model-{index:05d}-of-{len(shards):05d}.safetensors"
        tensors = {}
        t0 = time.perf_counter()
        on_device = {}
        for name, shape in shard:
            values = torch.randn(shape, generator=generator, device=device, dtype=torch.float32).mul_(std)
            if name.endswith("norm.weight"):
                values.add_(1.0)
            on_device[name] = values.to(dtype)
            del values
        if device == "cuda":
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        for name, tensor in on_device.items():
            tensors[name] = tensor.cpu()
        del on_device
        t2 = time.perf_counter()
        save_file(tensors, str(out / file), metadata={"format": "pt"})
        t3 = time.perf_counter()
        timings["generate_s"] += t1 - t0
        timings["to_cpu_s"] += t2 - t1
        timings["save_s"] += t3 - t2
        for name, tensor in tensors.items():
            weight_map[name] = file
            total += tensor.numel() * tensor.element_size()
        del tensors
        print(f"  {file}: {len(shard)} tensors, {(out / file).stat().st_size / 1e9:.2f} GB", flush=True)
    index_doc = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index_doc, indent=2) + "\n")
    for name in COPIED:
        if (config_dir / name).is_file():
            shutil.copyfile(config_dir / name, out / name)
    return {
        "out": str(out),
        "seed": seed,
        "std": std,
        "model_type": config.get("model_type"),
        "dtype": dtype_name,
        "device": device,
        "tensors": len(shapes),
        "parameters": sum(numel(shape) for _, shape in shapes),
        "bytes": total,
        "files": len(shards),
        "seconds": round(time.perf_counter() - started, 2),
        **{key: round(value, 2) for key, value in timings.items()},
    }


def check(config_dir: Path, out: Path, *, std: float) -> dict[str, Any]:
    """Read every file back: the names, shapes and dtype of the config's state dict, and values."""
    import torch
    from safetensors import safe_open

    config = json.loads((config_dir / "config.json").read_text())
    expected = dict(shapes_of(config, config_dir))
    _, stored, _ = dtype_of(config)
    seen: dict[str, tuple[int, ...]] = {}
    sample = None
    for file in sorted(out.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 - a safe_open handle is not iterable
                piece = handle.get_slice(name)
                if piece.get_dtype() != stored:
                    raise SystemExit(f"{file.name}: {name} is {piece.get_dtype()}, expected {stored}")
                seen[name] = tuple(piece.get_shape())
            if sample is None and "model.layers.0.self_attn.q_proj.weight" in seen:
                sample = handle.get_tensor("model.layers.0.self_attn.q_proj.weight").to(torch.float32)
    problems = []
    if set(seen) != set(expected):
        problems.append(
            f"names differ: missing {sorted(set(expected) - set(seen))[:5]}, extra {sorted(set(seen) - set(expected))[:5]}"
        )
    problems += [
        f"{name}: {seen[name]} != {shape}"
        for name, shape in expected.items()
        if seen.get(name, shape) != shape
    ]
    measured = float(sample.std()) if sample is not None else float("nan")
    if not abs(measured - std) < 0.1 * std:
        problems.append(f"q_proj std {measured:.4f}, expected {std}")
    if problems or sample is None:  # no sample: its std is nan, a problem above
        raise SystemExit(f"{out}: " + "; ".join(problems))
    return {
        "checked_tensors": len(seen),
        "q_proj_std": round(measured, 5),
        "q_proj_first": float(sample.reshape(-1)[0]),
    }


SAFETENSORS_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32", "float64": "F64"}


def _sha256(tensor: Any) -> str:
    import hashlib

    return hashlib.sha256(tensor.contiguous().reshape(-1).view(torch_uint8()).numpy()).hexdigest()


def torch_uint8() -> Any:
    import torch

    return torch.uint8


def _digest(lines: dict[str, str]) -> str:
    """`ng_cli.upstream.delta.checkpoint_digest` from each tensor's line (name, dtype, shape, sha256)."""
    import hashlib

    combined = hashlib.sha256()
    for name in sorted(lines):
        combined.update(lines[name].encode())
    return combined.hexdigest()


def write_changed(base: Path, out: Path, delta_out: Path, *, fraction: float, seed: int) -> dict[str, Any]:
    """B' = `base` with `fraction` of each tensor's elements changed, at `out`; the delta at `delta_out`."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    for folder in (out, delta_out):
        folder.mkdir(parents=True, exist_ok=True)
        for old in [*folder.glob("*.safetensors"), *folder.glob("ng_delta.json")]:
            old.unlink()
    started = time.perf_counter()
    base_lines: dict[str, str] = {}
    new_lines: dict[str, str] = {}
    delta: dict[str, Any] = {}
    manifest: dict[str, Any] = {}
    changed = elements = 0
    for file in sorted(base.glob("*.safetensors")):
        tensors = {}
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 - a safe_open handle is not iterable
                old = handle.get_tensor(name)
                dtype = SAFETENSORS_DTYPES[str(old.dtype).removeprefix("torch.")]
                shape = list(old.shape)
                base_lines[name] = f"{name}\0{dtype}\0{','.join(map(str, shape))}\0{_sha256(old)}\n"
                flat = old.to(device).reshape(-1)
                picked = torch.rand(flat.numel(), generator=generator, device=device) < fraction
                new = torch.where(picked, (flat.float() * 1.0625 + 1e-3).to(flat.dtype), flat)
                bits = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[flat.element_size()]
                indices = (new.view(bits) != flat.view(bits)).nonzero().reshape(-1)
                tensors[name] = new.reshape(old.shape).cpu()
                new_lines[name] = f"{name}\0{dtype}\0{','.join(map(str, shape))}\0{_sha256(tensors[name])}\n"
                elements += flat.numel()
                changed += indices.numel()
                if not indices.numel():
                    continue
                index_torch = torch.int32 if flat.numel() < 2**31 else torch.int64
                if (
                    indices.numel() * (flat.element_size() + index_torch.itemsize)
                    >= flat.numel() * flat.element_size()
                ):
                    delta[name] = tensors[name]
                    manifest[name] = {"kind": "whole", "dtype": dtype, "shape": shape}
                else:
                    delta[f"{name}:indices"] = indices.to(index_torch).cpu()
                    delta[f"{name}:values"] = new[indices].cpu()
                    manifest[name] = {
                        "kind": "elements",
                        "dtype": dtype,
                        "shape": shape,
                        "count": indices.numel(),
                    }
        save_file(tensors, str(out / file.name), metadata={"format": "pt"})
        print(f"  {file.name}: {len(tensors)} tensors changed at {fraction:g}", flush=True)
    for name in (*COPIED, "model.safetensors.index.json"):
        if (base / name).is_file():
            shutil.copyfile(base / name, out / name)
    save_file(delta, str(delta_out / "delta.safetensors"), metadata={"format": "ng_cli.weights_delta"})
    base_sha256, result_sha256 = _digest(base_lines), _digest(new_lines)
    body = {
        "format": "ng_cli.weights_delta",
        "format_version": 1,
        "base": {"sha256": base_sha256},
        "result": {"sha256": result_sha256},
        "tensors": manifest,
    }
    (delta_out / "ng_delta.json").write_text(json.dumps(body, indent=1) + "\n")
    delta_bytes = sum(path.stat().st_size for path in delta_out.iterdir())
    full_bytes = sum(path.stat().st_size for path in out.glob("*.safetensors"))
    return {
        "out": str(out),
        "delta": str(delta_out),
        "fraction": fraction,
        "elements_changed": changed,
        "elements": elements,
        "tensors_whole": sum(entry["kind"] == "whole" for entry in manifest.values()),
        "tensors_patched": sum(entry["kind"] == "elements" for entry in manifest.values()),
        "delta_bytes": delta_bytes,
        "checkpoint_bytes": full_bytes,
        "delta_share": round(delta_bytes / full_bytes, 4),
        "base_sha256": base_sha256,
        "result_sha256": result_sha256,
        "device": device,
        "seconds": round(time.perf_counter() - started, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config-dir",
        type=Path,
        help="tiny_model.py --arch llama3-8b (or --experts N) output",
    )
    parser.add_argument(
        "--changed-from", type=Path, help="write B' = this checkpoint with --fraction changed"
    )
    parser.add_argument(
        "--fraction", type=float, default=0.02, help="with --changed-from: of each tensor's elements"
    )
    parser.add_argument("--delta-out", type=Path, help="with --changed-from: where the delta goes")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--std", type=float, default=0.02)
    parser.add_argument("--shard-gb", type=float, default=4.0)
    parser.add_argument("--report", type=Path, help="append the result as a JSON line here")
    args = parser.parse_args(argv)
    if args.changed_from is not None:
        if args.delta_out is None:
            parser.error("--changed-from needs --delta-out")
        result = write_changed(
            args.changed_from, args.out, args.delta_out, fraction=args.fraction, seed=args.seed
        )
    elif args.config_dir is None:
        parser.error("give --config-dir (a random checkpoint) or --changed-from (B' and its delta)")
    else:
        result = write(args.config_dir, args.out, seed=args.seed, std=args.std, shard_gb=args.shard_gb)
        result.update(check(args.config_dir, args.out, std=args.std))
    line = json.dumps(result)
    print(line, flush=True)
    if args.report:
        with open(args.report, "a") as handle:
            handle.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
