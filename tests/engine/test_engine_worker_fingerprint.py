"""`engine_worker.WeightsExtension.ng_weights_fingerprint` under the engine's own torch (the CPU
engine venv): NaN and inf reported by name, and the part every expert-parallel rank must agree on
(all but the experts) digested apart from the whole."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ng_cli.toolchain.local_vllm import require_vllm_env

ENGINES = Path(__file__).resolve().parents[2] / "ng_cli" / "engines"

SCRIPT = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from engine_worker import WeightsExtension

class Model(torch.nn.Module):
    def __init__(self, expert, shared):
        super().__init__()
        self.attn = torch.nn.Linear(4, 4, bias=False)
        self.moe = torch.nn.Module()
        self.moe.experts = torch.nn.Linear(4, 4, bias=False)
        with torch.no_grad():
            self.attn.weight.fill_(shared)
            self.moe.experts.weight.fill_(expert)

class Runner:
    def __init__(self, model): self.model = model
    def get_model(self): return self.model

def fingerprint(expert, shared):
    worker = WeightsExtension()
    worker.model_runner = Runner(Model(expert, shared))
    return worker.ng_weights_fingerprint()

print(json.dumps({
    "rank0": fingerprint(1.0, 2.0),
    "rank1_other_experts": fingerprint(3.0, 2.0),
    "rank1_other_attention": fingerprint(1.0, 5.0),
    "nan": fingerprint(1.0, float("nan")),
    "inf": fingerprint(float("inf"), 2.0),
}))
"""


@pytest.mark.engine
def test_the_fingerprint_reports_non_finite_tensors_and_the_shared_part() -> None:
    done = subprocess.run(
        [str(require_vllm_env()), "-c", SCRIPT, str(ENGINES)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    whole0, _, shared0 = got["rank0"].partition(" shared=")
    whole1, _, shared1 = got["rank1_other_experts"].partition(" shared=")
    assert whole0 != whole1
    assert shared0 == shared1  # other experts, same rest
    assert got["rank1_other_attention"].partition(" shared=")[2] != shared0
    assert got["nan"] == "non-finite:1:attn.weight"
    assert got["inf"] == "non-finite:1:moe.experts.weight"
