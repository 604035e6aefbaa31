"""The README's first command earns real rewards with the embedded model (models/tiny-weather).

A module fixture runs the quickstart as `scripts/quickstart.sh` does after its installs
(`python -m ng_cli.commands.quickstart`): the launcher starts the CPU vLLM engine itself
(local_vllm_model, hermes tool parser), then the stack, then the collector runs over the 5
example rows, 2 rollouts each, at vLLM's default temperature, and everything is stopped. The
environment's `/verify` scores them; nothing here is forced or mocked. One run serves every
test here: the rollouts, the printed report, and that nothing is left behind.

Also checked: vLLM's `/tokenize` of each turn's chat request equals the training rendering token
for token (the training script's own `--verify-url` check, against the session's engine of the
same model), and the artifact stays small.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ng_cli.quickstart.plan import EMBEDDED_MODEL
from ng_cli.rollouts.resume import OutputPaths
from ng_cli.toolchain.local_vllm import vllm_venv_python
from tests.fixtures.stack.harness import MARKER_VAR, marked_pids
from tests.fixtures.vllm_engine import VllmServer

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / EMBEDDED_MODEL
TRAIN_SCRIPT = ROOT / "ng_cli" / "toolchain" / "train_weather_model.py"
NUM_ROWS, NUM_REPEATS = 5, 2
MIN_MEAN_REWARD = 0.8
MAX_ARTIFACT_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class Collected:
    rows: list[dict[str, Any]]
    quickstart: subprocess.CompletedProcess[str]
    output: Path
    run_dir: Path
    leftover_pids: list[int]
    """Processes of the run (marked through their environment) alive after the quickstart exited."""
    verify: subprocess.CompletedProcess[str]
    """The training script's `--verify-url` check against an engine of the same model."""


@pytest.fixture(scope="module")
def collected(weather_engine: VllmServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collected]:
    tmp = tmp_path_factory.mktemp("quickstart")
    output, run_dir = tmp / "rollouts.jsonl", tmp / "run"
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER_VAR: marker, "COLUMNS": "200"}
    for name in ("NG_REPO_ROOT", "NG_ENV_YAML"):
        env.pop(name, None)
    command = [sys.executable, "-m", "ng_cli.commands.quickstart", "--num-repeats", str(NUM_REPEATS)]
    command += ["--output", str(output), "--run-dir", str(run_dir)]
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
        )
        leftover = marked_pids(marker)
        verify = subprocess.run(
            [str(vllm_venv_python()), str(TRAIN_SCRIPT), "--out", str(MODEL_DIR), "--verify-url", weather_engine.root_url],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        lines = output.read_text().splitlines() if output.is_file() else []
        rows = [json.loads(line) for line in lines if line.strip()]
        yield Collected(rows, done, output, run_dir, leftover, verify)
    finally:
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


def test_the_engine_was_started_from_the_local_vllm_model_config(collected: Collected) -> None:
    engines = [line for line in collected.quickstart.stdout.splitlines() if line.startswith("engine: ")]
    assert len(engines) == 1, collected.quickstart.stdout[-4000:]
    assert engines[0].startswith("engine: policy_model/engine-0 http://127.0.0.1:")
    assert "(vllm 0.32.0, torch 2.13.0" in engines[0]


def test_every_row_is_collected_and_nothing_is_left_behind(collected: Collected) -> None:
    done = collected.quickstart
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "quickstart done" in done.stdout
    assert "trained offline" in done.stdout  # says what the embedded model is
    assert len(collected.rows) == NUM_ROWS * NUM_REPEATS
    assert all(isinstance(row["reward"], float | int) for row in collected.rows)
    assert OutputPaths.for_output(collected.output).metrics.is_file()
    report = collected.output.with_name("rollouts_report.html")  # the closing output names the HTML report
    assert str(report) in done.stdout
    assert report.is_file()
    assert not (collected.run_dir / "env.yaml").exists()  # the run's key is gone with the run
    assert (collected.run_dir.stat().st_mode & 0o777) == 0o700
    assert collected.leftover_pids == []  # engine and servers all stopped


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
