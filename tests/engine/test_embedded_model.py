"""The embedded default model (models/tiny-weather) earns real rewards through the real stack.

A module fixture starts `ng_run` with the quickstart's own configs and argv
(`ng_cli.quickstart.plan`): ng_run starts the CPU vLLM engine itself (local_vllm_model, hermes tool
parser) and then the stack; then it runs the real
`ng_collect_rollouts` over the 5 example rows, 2 rollouts each, at vLLM's default temperature.
The environment's `/verify` scores them; nothing here is forced or mocked.

Also checked: vLLM's `/tokenize` of each turn's chat request equals the training rendering token
for token (the training script's own `--verify-url` check), and the artifact stays small.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ng_cli.quickstart.plan import (
    EMBEDDED_MODEL,
    QuickstartPlan,
    child_env,
    collect_args,
    ng_run_args,
    write_env_file,
)
from ng_cli.quickstart.processes import StackProcess, console_script
from ng_cli.toolchain.local_vllm import vllm_venv_python
from tests.fixtures.stack.harness import MARKER_VAR, marked_pids

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / EMBEDDED_MODEL
TRAIN_SCRIPT = ROOT / "ng_cli" / "toolchain" / "train_weather_model.py"
NUM_ROWS, NUM_REPEATS = 5, 2
MIN_MEAN_REWARD = 0.8
MAX_ARTIFACT_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class Collected:
    rows: list[dict[str, Any]]
    collect: subprocess.CompletedProcess[str]
    stop_problems: list[str]
    engines: list[dict[str, Any]]
    """The ready file's engine rows: what ng_run started for local_vllm_model."""
    verify: subprocess.CompletedProcess[str]
    """The training script's `--verify-url` check against the running engine."""


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collected]:
    """The quickstart's own path: ng_run starts the engine (local_vllm_model) and the stack, the
    collector runs, and ng_run stops everything; the engine is also checked against the training
    rendering while it runs."""
    tmp = tmp_path_factory.mktemp("collect")
    plan = QuickstartPlan.default(ROOT).with_changes(
        output=tmp / "rollouts.jsonl", run_dir=tmp / "run", num_repeats=NUM_REPEATS
    )
    write_env_file(plan.env_file)
    marker = uuid.uuid4().hex
    env = {**child_env(plan, is_logged=True), MARKER_VAR: marker}
    env.pop("NG_REPO_ROOT", None)
    stack = StackProcess.start(
        [str(console_script("ng_run")), *ng_run_args(plan)],
        env=env,
        cwd=ROOT,
        ready_file=plan.ready_file,
        log_path=plan.ng_run_log,
        timeout_s=plan.ready_timeout_s,
    )
    try:
        engines = list(stack.ready["engines"])
        root_url = engines[0]["url"].removesuffix("/v1")
        verify = subprocess.run(
            [str(vllm_venv_python()), str(TRAIN_SCRIPT), "--out", str(MODEL_DIR), "--verify-url", root_url],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        collect = subprocess.run(
            [str(console_script("ng_collect_rollouts")), *collect_args(plan, stack.head_url)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        problems = stack.stop()
        lines = plan.output.read_text().splitlines() if plan.output.is_file() else []
        yield Collected(
            [json.loads(line) for line in lines if line.strip()], collect, problems, engines, verify
        )
    finally:
        stack.stop()
        for pid in marked_pids(marker):
            os.kill(pid, signal.SIGKILL)


def test_artifact_is_complete_and_small() -> None:
    names = {path.name for path in MODEL_DIR.iterdir()}
    expected = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"}
    assert expected | {"tokenizer_config.json", "README.md"} <= names
    assert sum(path.stat().st_size for path in MODEL_DIR.iterdir()) < MAX_ARTIFACT_BYTES
    tokenizer_config = json.loads((MODEL_DIR / "tokenizer_config.json").read_text())
    assert tokenizer_config["eos_token"] == "<|im_end|>"
    added = json.loads((MODEL_DIR / "tokenizer.json").read_text())["added_tokens"]
    special = {token["content"]: token["special"] for token in added}
    assert special["<tool_call>"] is False  # vLLM would strip a special tag before the hermes parser
    assert special["<|im_end|>"] is True


def test_vllm_tokenize_equals_the_training_rendering(collected: Collected) -> None:
    assert collected.verify.returncode == 0, collected.verify.stderr[-4000:]
    assert "0 mismatches" in collected.verify.stderr


def test_the_engine_was_started_by_ng_run_from_the_local_vllm_model_config(collected: Collected) -> None:
    (engine,) = collected.engines
    assert engine["name"] == "policy_model/engine-0"
    assert engine["devices"] == "cpu"
    assert engine["reported"].startswith("vllm 0.32.0, torch 2.13.0")


def test_every_row_is_collected_and_the_stack_stops_cleanly(collected: Collected) -> None:
    assert collected.collect.returncode == 0, collected.collect.stderr[-3000:]
    assert len(collected.rows) == NUM_ROWS * NUM_REPEATS
    assert collected.stop_problems == []


def test_each_rollout_calls_get_weather_with_the_rows_city(collected: Collected) -> None:
    for row in collected.rows:
        calls = [item for item in row["response"]["output"] if item["type"] == "function_call"]
        assert calls, row["response"]["output"]
        assert calls[0]["name"] == "get_weather"
        assert json.loads(calls[0]["arguments"]) == {"city": row["expected_city"]}


def test_mean_reward_is_high(collected: Collected) -> None:
    rewards = [float(row["reward"]) for row in collected.rows]
    finals = [row["response"]["output"][-1] for row in collected.rows]
    assert sum(rewards) / len(rewards) >= MIN_MEAN_REWARD, finals
