"""`engines/expert_check.py` under the engine's own torch and safetensors (the CPU engine venv),
on modules shaped like vLLM's `RoutedExperts` (`w13_weight`, `w2_weight`, `_expert_map`,
`layer_name`, `moe_config.moe_parallel_config`) over real safetensors files: which experts a
rank holds, exact and repacked layouts, tensor-parallel halves, the sample, the mismatch message,
and the layouts it refuses to guess. The real engine's check is tests/engine/test_expert_refit.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ng_cli.toolchain.local_vllm import require_vllm_env

ENGINES = Path(__file__).resolve().parents[2] / "ng_cli" / "engines"

SCRIPT = r"""
import json, sys, types, torch
from pathlib import Path
from safetensors.torch import save_file
sys.path.insert(0, sys.argv[1])
from expert_check import ExpertMismatchError, check_experts

out = Path(sys.argv[2])
EXPERTS, INTER, HIDDEN, LAYERS = 4, 6, 8, 2
torch.manual_seed(0)
files = {}
for layer in range(LAYERS):
    for expert in range(EXPERTS):
        for part, shape in (("gate_proj", (INTER, HIDDEN)), ("up_proj", (INTER, HIDDEN)), ("down_proj", (HIDDEN, INTER))):
            files[f"model.layers.{layer}.mlp.experts.{expert}.{part}.weight"] = torch.randn(shape)
files["model.embed_tokens.weight"] = torch.randn(10, HIDDEN)

def checkpoint(name, tensors, shards=1):
    directory = out / name
    directory.mkdir()
    names = sorted(tensors)
    weight_map = {}
    for index in range(shards):
        file = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        part = {key: tensors[key].contiguous() for key in names[index::shards]}
        save_file(part, str(directory / file), metadata={"format": "pt"})
        weight_map.update({key: file for key in part})
    if shards > 1:
        (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return str(directory)

class Experts(torch.nn.Module):
    def __init__(self, layer, held, ep_rank, ep_size, tp_rank=0, tp_size=1, dtype=torch.float32, permute=False):
        super().__init__()
        self.layer_name = f"model.layers.{layer}.mlp.experts"
        self.global_num_experts = EXPERTS
        self.ckpt_gate_proj_name, self.ckpt_down_proj_name, self.ckpt_up_proj_name = "gate_proj", "down_proj", "up_proj"
        self.moe_config = types.SimpleNamespace(moe_parallel_config=types.SimpleNamespace(
            ep_rank=ep_rank, ep_size=ep_size, dp_rank=ep_rank, tp_rank=tp_rank, tp_size=tp_size, enable_eplb=False))
        mapping = [-1] * EXPERTS
        for slot, expert in enumerate(held):
            mapping[expert] = slot
        self.register_buffer("_expert_map", torch.tensor(mapping) if ep_size > 1 else None)
        rows = INTER // tp_size
        w13, w2 = [], []
        for expert in held:
            name = f"model.layers.{layer}.mlp.experts.{expert}."
            gate = files[name + "gate_proj.weight"][tp_rank * rows:(tp_rank + 1) * rows]
            up = files[name + "up_proj.weight"][tp_rank * rows:(tp_rank + 1) * rows]
            down = files[name + "down_proj.weight"][:, tp_rank * rows:(tp_rank + 1) * rows]
            pair = torch.cat([gate, up])
            w13.append(pair.flip(0) if permute else pair)  # a kernel's repacked layout: same values
            w2.append(down)
        self.w13_weight = torch.nn.Parameter(torch.stack(w13).to(dtype), requires_grad=False)
        self.w2_weight = torch.nn.Parameter(torch.stack(w2).to(dtype), requires_grad=False)

class Model(torch.nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.embed = torch.nn.Embedding(10, HIDDEN)
        self.layers = torch.nn.ModuleList()
        for layer in range(LAYERS):
            block = torch.nn.Module()
            block.mlp = torch.nn.Module()
            block.mlp.experts = torch.nn.Module()
            block.mlp.experts.routed_experts = Experts(layer, **kwargs)
            self.layers.append(block)

def run(model, path, budget=1 << 30, seed=0):
    try:
        return check_experts(model, path, budget_bytes=budget, seed=seed)
    except ExpertMismatchError as error:
        return {"error": str(error)}

a = checkpoint("A", files)
a_sharded = checkpoint("A3", files, shards=3)
changed = dict(files)
changed["model.layers.1.mlp.experts.3.down_proj.weight"] = files["model.layers.1.mlp.experts.3.down_proj.weight"] + 1e-3
b = checkpoint("B", changed)
renamed = {key.replace("gate_proj", "w1"): value for key, value in files.items()}
r = checkpoint("R", renamed)

rank1 = Model(held=[2, 3], ep_rank=1, ep_size=2)
rank0 = Model(held=[0, 1], ep_rank=0, ep_size=2)
result = {
    "rank1": run(rank1, a),
    "rank1_sharded": run(rank1, a_sharded),
    "rank0_other_expert_changed": run(rank0, b),
    "rank1_other_expert_changed": run(rank1, b),
    "repacked": run(Model(held=[2, 3], ep_rank=1, ep_size=2, permute=True), a),
    "tp_half": run(Model(held=[0, 1, 2, 3], ep_rank=0, ep_size=1, tp_rank=1, tp_size=2), a),
    "bf16": run(Model(held=[2, 3], ep_rank=1, ep_size=2, dtype=torch.bfloat16), a),
    "sample_seed0": run(rank1, b, budget=1, seed=0),
    "sample_seed1": run(rank1, b, budget=1, seed=1),
    "names_missing": run(rank1, r),
    "quantized": run(Model(held=[2, 3], ep_rank=1, ep_size=2, dtype=torch.float8_e4m3fn), a),
    "dense": run(torch.nn.Linear(2, 2), a),
}
print(json.dumps(result))
"""


@pytest.mark.engine
def test_each_rank_is_checked_against_its_own_experts_in_the_files(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(require_vllm_env()), "-c", SCRIPT, str(ENGINES), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])

    rank1 = got["rank1"]
    assert (rank1["layers"], rank1["held"], rank1["checked"], rank1["exact"]) == (2, 4, 4, 4)
    assert (rank1["ep_rank"], rank1["ep_size"], rank1["sampled"], rank1["unchecked"]) == (1, 2, False, None)
    assert rank1["held_ids"] == [2, 3]
    assert rank1["bytes_read"] == 4 * 3 * 6 * 8 * 4  # its 2 experts x 2 layers, 3 float32 [6, 8] each
    assert got["rank1_sharded"]["exact"] == 4  # through model.safetensors.index.json

    # Expert 3 of layer 1 changed in the files: rank 1 holds it and fails, naming it; rank 0 does not.
    assert got["rank0_other_expert_changed"]["exact"] == 4
    error = got["rank1_other_expert_changed"]["error"]
    assert error.startswith("EP rank 1 of 2: 1 of 4 checked experts differ from the checkpoint's files")
    assert error.endswith(": model.layers.1.mlp.experts expert 3 (w2)")

    # A kernel's repacked layout keeps the values: compared as multisets, and counted apart.
    assert (got["repacked"]["exact"], got["repacked"]["as_multiset"]) == (0, 4)
    assert got["tp_half"]["exact"] == 8  # tensor-parallel rank 1: the second half of each projection
    assert got["bf16"]["exact"] == 4  # the files' float32 as the engine's dtype casts them

    # Over budget: one expert per layer, the offset moving with the seed (the version).
    assert (got["sample_seed0"]["checked"], got["sample_seed0"]["sampled"]) == (2, True)
    assert got["sample_seed1"]["error"].endswith("model.layers.1.mlp.experts expert 3 (w2)")

    # What it cannot compare, it says, and passes nothing off as checked.
    assert got["names_missing"]["checked"] == 0
    assert "hold no model.layers.0.mlp.experts.2.gate_proj.weight" in got["names_missing"]["unchecked"]
    assert "quantized experts" in got["quantized"]["unchecked"]
    assert got["dense"]["unchecked"] == "the model has no expert layers"
