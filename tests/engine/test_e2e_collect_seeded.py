"""One-shot collection against the real CPU vLLM: seeded repeats reproduce, rewards are profiled.

The embedded weather model (models/tiny-weather) serves the example environment. Only a real
model shows what `+num_repeats_add_seed=true` is for: two separate `ng_e2e_collect_rollouts`
runs (each starting and stopping its own stack) sample the same text for every (task, repeat),
while the repeats of one task are sampled with different seeds. `ng_reward_profile` then reads
the rewards the environment's `/verify` gave, per task.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from ng_cli.quickstart.plan import write_env_file
from tests.fixtures.stack.harness import MARKER_VAR, marked_pids
from tests.fixtures.stack_process import console_script
from tests.fixtures.vllm_engine import VllmServer

ROOT = Path(__file__).resolve().parents[2]
REPEATS = 3
# The engine is started once for both runs (module fixture), so the stack uses vllm_model against it.
CONFIG_PATHS = (
    "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
    "responses_api_models/vllm_model/configs/vllm_model.yaml",
)


def rows_by_pair(path: Path) -> dict[tuple[int, int], dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(row["_ng_task_index"], row["_ng_rollout_index"]): row for row in rows}


def texts(row: dict[str, Any]) -> list[str]:
    """Everything the model generated in the rollout: tool-call arguments and message text."""
    out = []
    for item in row["response"]["output"]:
        if item["type"] == "function_call":
            out.append(item["arguments"])
        elif item["type"] == "message":
            out.extend(part.get("text", "") for part in item["content"])
    return out


def test_seeded_repeats_reproduce_across_runs_and_rewards_are_profiled(
    weather_engine: VllmServer, tmp_path: Path
) -> None:
    env_file = write_env_file(
        tmp_path / "env.yaml",
        {
            "policy_base_url": weather_engine.base_url,
            "policy_api_key": weather_engine.api_key,
            "policy_model_name": "tiny-weather",
        },
    )
    marker = uuid.uuid4().hex
    env = {**os.environ, "NG_ENV_YAML": str(env_file), MARKER_VAR: marker}
    env.pop("NG_REPO_ROOT", None)
    outputs = [tmp_path / f"run{i}" / "rollouts.jsonl" for i in (1, 2)]
    for output in outputs:
        done = subprocess.run(
            [
                str(console_script("ng_e2e_collect_rollouts")),
                "+config_paths=[" + ",".join(CONFIG_PATHS) + "]",
                "+split=example",
                f"+output_jsonl_fpath={output}",
                f"+num_repeats={REPEATS}",
                "+num_repeats_add_seed=true",
                "+responses_create_params.temperature=1.5",
                "+responses_create_params.max_output_tokens=256",
            ],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert marked_pids(marker) == []  # the stack of this run is gone
    first, second = rows_by_pair(outputs[0]), rows_by_pair(outputs[1])
    assert set(first) == {(task, k) for task in range(5) for k in range(REPEATS)}
    assert {pair: texts(row) for pair, row in first.items()} == {
        pair: texts(row) for pair, row in second.items()
    }
    assert all(
        row["responses_create_params"]["metadata"]["extra_body"] == f'{{"seed": {k}}}'
        for (_, k), row in first.items()
    )
    # Reproducible because of the seeds, not because the model is deterministic: other seeds
    # (the repeats of one task) give other samples.
    variants = [{tuple(texts(first[(task, k)])) for k in range(REPEATS)} for task in range(5)]
    assert any(len(samples) > 1 for samples in variants), variants

    profile = tmp_path / "profile.jsonl"
    done = subprocess.run(
        [
            str(console_script("ng_reward_profile")),
            f"+input_jsonl_fpath={outputs[0].parent / 'rollouts_inputs' / 'example.jsonl'}",
            f"+rollouts_jsonl_fpath={outputs[0]}",
            f"+output_jsonl_fpath={profile}",
            "+keep_pass_rate=[0.1,0.9]",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in profile.read_text().splitlines()]
    for line in lines:
        rewards = [first[(line["_ng_task_index"], k)]["reward"] for k in range(REPEATS)]
        assert line["mean_reward"] == pytest.approx(sum(rewards) / REPEATS)
        assert line["pass_rate"] == sum(r > 0 for r in rewards) / REPEATS
    assert sum(line["mean_reward"] for line in lines) / len(lines) >= 0.8  # the model does the task
    kept = (tmp_path / "profile.kept.jsonl").read_text().splitlines()
    assert len(kept) == sum(0.1 <= line["pass_rate"] <= 0.9 for line in lines)
