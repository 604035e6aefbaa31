"""`engines/delta_apply.py` under the engine's own torch (the CPU engine venv), on a model whose
loader does what vLLM's do: a fused qkv parameter written part by part through `narrow().copy_()`,
and a parameter the CPU build has packed away (empty). Deltas made by the maker
(`training/delta.py`) from real safetensors files:

* in place: a whole tensor, an element patch of a fused part (the other parts and the unchanged
  elements stay), an element patch of a plain tensor: the result is the new checkpoint, exactly;
* composed: a change to the packed parameter streams the full checkpoint with the chain of deltas
  applied (what the engine's reload gets), equal to the new checkpoint;
* refused before anything is written: an index out of range, an index given twice, a NaN value.
"""

from __future__ import annotations

import array
import json
import subprocess
from pathlib import Path

import pytest

from ng_cli.toolchain.local_vllm import require_vllm_env
from ng_cli.training.delta import Change, make_delta, write_delta
from tests.fixtures import checkpoints

ENGINES = Path(__file__).resolve().parents[2] / "ng_cli" / "engines"
SHAPES = {
    "model.embed_tokens.weight": (6, 4),
    "model.layers.0.self_attn.q_proj.weight": (4, 4),
    "model.layers.0.self_attn.k_proj.weight": (2, 4),
    "model.layers.0.self_attn.v_proj.weight": (2, 4),
    "model.layers.0.mlp.down_proj.weight": (4, 4),
}

SCRIPT = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from delta_apply import apply_delta, read_safetensors

FUSED = {"q_proj": (0, 4), "k_proj": (4, 2), "v_proj": (6, 2)}

class Model(torch.nn.Module):
    packed_modules_mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}

    def __init__(self):
        super().__init__()
        self.p = torch.nn.ParameterDict()
        self.names = {
            "model.embed_tokens.weight": (6, 4),
            "model.layers.0.self_attn.qkv_proj.weight": (8, 4),
            "model.layers.0.mlp.down_proj.weight": (4, 4),
        }
        for name, shape in self.names.items():
            self.p[name.replace(".", "_")] = torch.nn.Parameter(torch.zeros(shape), requires_grad=False)

    def named_parameters(self):
        return [(name, self.p[name.replace(".", "_")]) for name in self.names]

    def parameters(self):
        return [parameter for _, parameter in self.named_parameters()]

    def load_weights(self, weights):
        params = dict(self.named_parameters())
        for name, weight in weights:
            part = name.split(".")[-2]
            if part in FUSED:
                offset, rows = FUSED[part]
                params[name.replace(part, "qkv_proj")].data.narrow(0, offset, rows).copy_(weight)
            else:
                params[name].data.copy_(weight)

def loaded(path, packed):
    model = Model()
    model.load_weights(list(read_safetensors(path).items()))
    if packed:  # as the CPU build does after loading: the values go into its GEMM kernel
        model.p["model_layers_0_mlp_down_proj_weight"] = torch.nn.Parameter(torch.empty(0), requires_grad=False)
    return model

def state(model):
    return {name: p.detach().reshape(-1).tolist() for name, p in model.named_parameters()}

job = json.loads(sys.argv[2])
model = loaded(job["full"] + "/model.safetensors", job["packed"])
streamed = {}
try:
    how = apply_delta(model, job["delta"], job["resident"], lambda weights: streamed.update(
        {name: tensor.reshape(-1).tolist() for name, tensor in weights}))
    print(json.dumps({"how": how, "state": state(model), "streamed": streamed}))
except ValueError as error:
    print(json.dumps({"error": str(error), "state": state(model)}))
"""


def checkpoint(out: Path, values: dict[str, list[float]]) -> Path:
    header: dict[str, object] = {}
    payload = b""
    for name, shape in SHAPES.items():
        data = array.array("f", values[name]).tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(shape),
            "data_offsets": [len(payload), len(payload) + len(data)],
        }
        payload += data
    checkpoints.write(out / "model.safetensors", header, payload)
    return out


def run(job: dict[str, object]) -> dict[str, object]:
    done = subprocess.run(
        [str(require_vllm_env()), "-c", SCRIPT, str(ENGINES), json.dumps(job)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture
def a_and_b() -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    a = {name: [float(i + 1) for i in range(shape[0] * shape[1])] for name, shape in SHAPES.items()}
    b = {name: list(values) for name, values in a.items()}
    b["model.embed_tokens.weight"] = [v * 2 for v in a["model.embed_tokens.weight"]]  # whole
    b["model.layers.0.self_attn.k_proj.weight"][5] = -1.5  # one element of a fused part
    b["model.layers.0.mlp.down_proj.weight"][0] = 100.0
    return a, b


def fused(values: dict[str, list[float]]) -> list[float]:
    return [
        v
        for part in ("q_proj", "k_proj", "v_proj")
        for v in values[f"model.layers.0.self_attn.{part}.weight"]
    ]


@pytest.mark.engine
def test_in_place_and_composed_give_the_new_checkpoint(
    tmp_path: Path, a_and_b: tuple[dict[str, list[float]], dict[str, list[float]]]
) -> None:
    a, b = a_and_b
    full_a, full_b = checkpoint(tmp_path / "A", a), checkpoint(tmp_path / "B", b)
    summary = make_delta(full_a, full_b, tmp_path / "AB")
    assert (summary["whole"], summary["element_patches"]) == (1, 2)
    job = {"full": str(full_a), "delta": str(tmp_path / "AB"), "resident": [str(full_a)]}

    in_place = run({**job, "packed": False})
    assert in_place["how"] == "in place"
    assert in_place["streamed"] == {}
    state = in_place["state"]
    assert isinstance(state, dict)
    assert state["model.embed_tokens.weight"] == b["model.embed_tokens.weight"]
    assert state["model.layers.0.self_attn.qkv_proj.weight"] == fused(b)
    assert state["model.layers.0.mlp.down_proj.weight"] == b["model.layers.0.mlp.down_proj.weight"]

    composed = run({**job, "packed": True})
    assert composed["how"] == "composed reload"
    assert composed["streamed"] == b


@pytest.mark.engine
@pytest.mark.parametrize(
    ("indices", "values", "message"),
    [
        ([99], [1.0], "an index outside its 24 elements"),
        ([2, 2], [1.0, 2.0], "an index given twice"),
        ([3], [float("nan")], "holds NaN"),
    ],
)
def test_a_bad_patch_is_refused_before_anything_is_written(
    tmp_path: Path,
    a_and_b: tuple[dict[str, list[float]], dict[str, list[float]]],
    indices: list[int],
    values: list[float],
    message: str,
) -> None:
    a, _ = a_and_b
    full_a = checkpoint(tmp_path / "A", a)
    delta = write_delta(
        tmp_path / "bad",
        base="0" * 64,
        result="0" * 64,
        changes=[
            Change(
                "model.layers.0.mlp.down_proj.weight",
                "F32",
                (4, 4),
                whole=array.array("f", [7.0] * 16).tobytes(),
            ),
            Change(
                "model.embed_tokens.weight",
                "F32",
                (6, 4),
                indices=array.array("q", indices).tobytes(),
                values=array.array("f", values).tobytes(),
            ),
        ],
    )
    answer = run({"full": str(full_a), "delta": str(delta), "resident": [str(full_a)], "packed": False})
    assert message in str(answer["error"])
    assert answer["state"]["model.layers.0.mlp.down_proj.weight"] == a["model.layers.0.mlp.down_proj.weight"]  # type: ignore[index]
