"""Every bench/ script, run as a user runs it, on its smallest setting: a smoke run per script.

A benchmark is code too: a merge that breaks one (as one broke `proxy_overhead.py --stream`)
fails here, not the next time someone measures. Each script writes its results to the test's
temporary directory (`--out`/`--output`), never over the committed bench/results/. The numbers
of a smoke run mean nothing and are not checked: only that the script ran to the end and wrote
well-formed JSON. Scripts that need the CPU vLLM engine run under NG_REQUIRE_ENGINE as the
engine tests do (the training and weight-reload ones too: about 4 min in all on 2 idle cores);
the ones that need a GPU or NeMo Gym's tree parse their options and skip with the reason.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ng_cli.toolchain.local_vllm import vllm_venv_python
from ng_cli.training.delta import make_delta
from tests.fixtures import checkpoints
from tests.fixtures.delta_checkpoints import bump, edited
from tests.fixtures.engine_env import require_vllm_env
from tests.fixtures.stack.harness import MARKER_VAR, marked_pids
from tests.fixtures.wheelhouse import make_wheel, write_wheelhouse

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
TIMEOUT_S = 900
"""A cap for a hung script (the engine ones start a CPU vLLM on 2 busy cores), not a measurement."""


@dataclass(frozen=True)
class Smoke:
    script: str
    args: str
    """The smallest setting, split on spaces."""
    out_flag: str = "--out"
    engine: bool = False
    """Needs the CPU vLLM env: skipped without it, failed without it under NG_REQUIRE_ENGINE."""
    engine_python: bool = False
    """Runs under the engine venv's interpreter (torch, vLLM), as its docstring says."""
    beside_engine_tests: bool = False
    """An engine smoke that scripts/test.sh runs in its second process (marker `bench`), beside the
    engine tests instead of after them: the two processes then take about as long."""
    prepare: Callable[[Path], list[str]] | None = field(default=None, compare=False)
    """Builds inputs in the test's directory and returns extra arguments."""


def _demo_wheelhouse(tmp: Path) -> list[str]:
    house = tmp / "house"
    house.mkdir()
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    app = make_wheel(house, "ngdemo-app", "1.0", requires=("ngdemo-lib==1.0",))
    lib = make_wheel(house, "ngdemo-lib", "1.0")
    write_wheelhouse(house, [app, lib], python=python, install=["ngdemo-app==1.0"])
    return ["--wheelhouse", str(house), "--dry-run", "--python", sys.executable]


def _tiny_llama_config(tmp: Path) -> list[str]:
    """An 8B-shaped Llama config directory (tiny_model.py), shrunk to a few MB of weights."""
    config_dir = tmp / "llama"
    subprocess.run(
        [str(vllm_venv_python()), str(ROOT / "ng_cli" / "toolchain" / "tiny_model.py"),
         "--arch", "llama3-8b", "--out", str(config_dir)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    config = json.loads((config_dir / "config.json").read_text())
    config.update(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16)  # fmt: skip
    (config_dir / "config.json").write_text(json.dumps(config))
    return ["--config-dir", str(config_dir), "--seed", "1", "--shard-gb", "0.001"]


def _tiny_gemma(tmp: Path) -> list[str]:
    model = tmp / "gemma"
    subprocess.run(
        [str(vllm_venv_python()), str(ROOT / "ng_cli" / "toolchain" / "tiny_model.py"),
         "--arch", "gemma3", "--out", str(model)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return ["--model", str(model)]


def _changed_from(tmp: Path) -> list[str]:
    """B' and the delta from the embedded model (a copy: the script writes beside nothing of ours)."""
    a = checkpoints.copy(ROOT / "models" / "tiny-weather", tmp / "A")
    return ["--changed-from", str(a), "--delta-out", str(tmp / "delta")]


def _delta_inputs(tmp: Path) -> list[str]:
    """A (the embedded model, as the stack boots it), B = A with a few elements changed, the maker's
    delta A -> B, and the CPU stack's configs."""
    a = checkpoints.copy(ROOT / "models" / "tiny-weather", tmp / "A")
    b = edited(a, tmp / "B", {"model.norm.weight": bump(range(0, 256, 3), 0.5)})
    make_delta(a, b, tmp / "delta")
    return [
        "--config", "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
        "--config", "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml",
        "--checkpoint-a", str(a), "--checkpoint-b", str(b), "--delta", str(tmp / "delta"),
        "--workdir", str(tmp / "work"),
    ]  # fmt: skip


def _pg_inputs(_tmp: Path) -> list[str]:
    model = ROOT / "models" / "tiny-weather"
    return ["--base", str(model), "--weights", str(model), "--noise", "0.5"]


SMOKES = [
    Smoke("collect_throughput.py", "--levels 1 --scale 0.02"),
    Smoke("proxy_overhead.py", "--sequential 3 --concurrency 2 --concurrent-calls 4 --modes plain"),
    Smoke(
        "proxy_overhead.py",
        "--stream --sequential 2 --concurrency 2 --tokens 4 --stream-rounds 1 --single-stream-calls 2 --modes plain",
    ),
    Smoke("report_scale.py", "--sizes 20 --no-browser"),
    Smoke("startup.py", "--runs 1 --stack fixture"),
    Smoke("upstream_outage.py", "--rollouts 8 --parallel 2 --delay-s 0.01 --outage-s 0.5 --kill-at-s 0.2"),
    Smoke("offline_install.py", "", prepare=_demo_wheelhouse),
    Smoke("engine_efficiency.py", "--concurrency 1 --requests 2 --rounds 1 --max-tokens 4", engine=True),
    Smoke("weight_update.py", "--updates 1", out_flag="--output", engine=True, beside_engine_tests=True),
    Smoke("pg_train_step.py", "", engine=True, engine_python=True, prepare=_pg_inputs),
    Smoke(
        "make_random_checkpoint.py",
        "",
        out_flag="--report",
        engine=True,
        engine_python=True,
        prepare=_tiny_llama_config,
    ),
    Smoke("gemma_dummy_refit.py", "", engine=True, engine_python=True, prepare=_tiny_gemma),
    Smoke(
        "make_random_checkpoint.py",
        "--fraction 0.02",
        out_flag="--report",
        engine=True,
        engine_python=True,
        prepare=_changed_from,
    ),
    Smoke("weight_delta.py", "--rounds 1", out_flag="--output", engine=True, prepare=_delta_inputs),
]
RUN_BY_THEIR_OWN_TEST = {
    "policy_gradient.py": "tests/bench/test_learning_curve.py: its learning curve, checked from the rows",
}
NOT_RUN_HERE = {
    "weight_update_8b.py": "needs a GPU: an 8B model with real weights (bench/gpu_session.sh weights8b)",
    "moe_dp_ep.py": "needs two GPUs: moe_dp2_ep2 through ng_run (bench/gpu_session.sh moe28)",
    "weight_push.py": "needs a GPU: CUDA IPC or NCCL from a trainer process to the engine (bench/gpu_session.sh pushipc8b, pushnccl8b)",
    "trl_nemo_gym.py": "needs TRL (the trl extra, torch first) and TRL's grpo_nemo_gym.py, which is not in this "
    "repository (--script PATH); tests/engine/test_trl_rollout_func.py runs a client of its shape in CI",
    "trl_vllm_client.py": "needs TRL (its VLLMClient, run in the engine's interpreter; --trl-site): the routes it "
    "calls run in CI through tests/integration/test_vllm_weight_routes.py",
    "nemo_gym_servers.py": "needs NeMo Gym's tree (--nemo-gym ROOT: its 43 MB wheel unpacked)",
    "nemo_gym_startup.py": "needs NeMo Gym's tree and its own dependencies (--nemo-gym ROOT)",
    "nemo_gym_own_tests.py": "needs NeMo Gym's tree (--nemo-gym ROOT: runs its servers' own tests)",
}


def _marks(smoke: Smoke) -> list[pytest.MarkDecorator]:
    """`engine` selects scripts/test.sh's engine process; `bench` moves one to the process beside it."""
    marks = [pytest.mark.engine] if smoke.engine else []
    return [*marks, pytest.mark.bench] if smoke.beside_engine_tests else marks


def _id(smoke: Smoke) -> str:
    return (
        smoke.script.removesuffix(".py")
        + ("-stream" if "--stream" in smoke.args else "")
        + ("-delta" if "--fraction" in smoke.args else "")
    )


def test_every_bench_script_has_a_smoke_run_or_a_reason() -> None:
    # bench/_x.py: code the scripts share, not a script
    scripts = {path.name for path in BENCH.glob("*.py") if not path.name.startswith("_")}
    assert scripts == {smoke.script for smoke in SMOKES} | set(NOT_RUN_HERE) | set(RUN_BY_THEIR_OWN_TEST)


@pytest.mark.parametrize(
    "smoke",
    [pytest.param(smoke, marks=_marks(smoke)) for smoke in SMOKES],
    ids=_id,
)
def test_bench_script_runs_on_its_smallest_setting(smoke: Smoke, tmp_path: Path) -> None:
    if smoke.engine:
        require_vllm_env()
    python = vllm_venv_python() if smoke.engine_python else Path(sys.executable)
    extra = smoke.prepare(tmp_path) if smoke.prepare else []
    out = tmp_path / "result.json"
    if smoke.script == "pg_train_step.py":  # its --out is the new weights' directory
        out = tmp_path / "weights"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    command = [str(python), str(BENCH / smoke.script), *smoke.args.split(), *extra, smoke.out_flag, str(out)]
    if smoke.script == "make_random_checkpoint.py":
        command += ["--out", str(tmp_path / "checkpoint")]
    env[MARKER_VAR] = marker = uuid.uuid4().hex  # a script's ng_run runs in a session of its own
    try:
        result = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    finally:
        for pid in marked_pids(marker):  # what a script that failed or overran left behind
            os.kill(pid, signal.SIGKILL)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    if out.is_dir():
        assert any(out.glob("*.safetensors")), f"{smoke.script} wrote no weights to {out}"
    else:
        text = out.read_text()
        assert json.loads(text.splitlines()[-1] if smoke.out_flag == "--report" else text)


@pytest.mark.parametrize("script", sorted(NOT_RUN_HERE))
def test_a_bench_script_not_run_here_parses_its_options_and_skips_the_run(script: str) -> None:
    """Its imports and options at least (`--help`); the run itself needs what CI has not."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, str(BENCH / script), "--help"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    pytest.skip(f"{script}: {NOT_RUN_HERE[script]}")
