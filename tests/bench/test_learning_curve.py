"""A model learns through the stack: the learning-curve smoke of `bench/policy_gradient.py` (issue 44).

The bench runs as a user runs it after the README's install (`pip install -e .`, no dev extra):
a `pytest` package that cannot be imported comes first on its path, so a bench that reaches for
the test fixtures (which import pytest) fails here, as it failed for a user.

The smoke: seed 2's weak start (noise 1.0 on the blocks' matrices; it scored 0.3 when measured),
3 GRPO steps on collections of 40 rollouts (8 seeded samples of each of the 5 example rows), on
the CPU engine. From the rows themselves: every row of collection k was made by the k-th version
alone (on-policy, staleness 0), and the last collection's mean reward is at least 0.3 above the
first's. With the train step made a no-op (`--lr 0`: Adam moves nothing) the rows come from the
same weights every time and only the sampling differs, about 0.1 of mean reward at 40 rollouts
(the standard deviation of a difference of two collections' means), so the margin fails it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.engine_env import require_vllm_env
from tests.fixtures.stack.harness import MARKER_VAR, marked_pids

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "policy_gradient.py"
STEPS = 3
ROWS_PER_COLLECTION = 40
MARGIN = 0.3
TIMEOUT_S = 1200
"""A cap for a hung run (a CPU vLLM and a torch trainer on 2 busy cores), not a measurement."""


def readme_install_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user without the dev extra: importing pytest fails."""
    blocker = tmp_path / "no-dev-extra" / "pytest"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text(
        'raise ImportError("pytest is not installed (the README install)")\n'
    )
    return {**os.environ, "PYTHONPATH": str(blocker.parent), MARKER_VAR: uuid.uuid4().hex}


def run_bench(
    args: list[str], env: dict[str, str], cwd: Path, timeout_s: float
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, str(BENCH), *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    finally:
        for pid in marked_pids(env[MARKER_VAR]):  # what a run that failed or overran left behind
            os.kill(pid, signal.SIGKILL)


def test_the_bench_runs_on_the_readme_install(tmp_path: Path) -> None:
    """Its imports and options without pytest (it imported tests/fixtures, which imports pytest)."""
    done = run_bench(["--help"], readme_install_env(tmp_path), tmp_path, 120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--noise" in done.stdout


@pytest.mark.engine
@pytest.mark.bench
@pytest.mark.slow
def test_a_weakened_model_learns_on_policy_through_the_stack(tmp_path: Path) -> None:
    require_vllm_env()
    runs = tmp_path / "runs"
    args = ["--seeds", "2", "--modes", "on-policy", "--noise", "1.0", "--steps", str(STEPS), "--repeats", "8"]
    done = run_bench(
        [*args, "--runs-dir", str(runs), "--output", str(tmp_path / "result.json")],
        readme_install_env(tmp_path),
        tmp_path,
        TIMEOUT_S,
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    rows = [json.loads(line) for line in (runs / "2-on-policy.jsonl").read_text().split("\n") if line.strip()]
    assert len(rows) == (STEPS + 1) * ROWS_PER_COLLECTION
    collections = [rows[i : i + ROWS_PER_COLLECTION] for i in range(0, len(rows), ROWS_PER_COLLECTION)]
    first_version = rows[0]["weight_version"]["start"]
    for index, collection in enumerate(collections):
        made_by = {(row["weight_version"]["start"], row["weight_version"]["end"]) for row in collection}
        assert made_by == {(first_version + index, first_version + index)}, f"collection {index}: {made_by}"
        assert all(row["weight_version"]["staleness"] == 0 for row in collection)
        assert all(call["generation_log_probs"] for call in _calls(collection))  # what the trainer used
    means = [sum(float(row["reward"]) for row in collection) / len(collection) for collection in collections]
    assert means[-1] >= means[0] + MARGIN, f"mean reward per collection: {means}"
    assert (runs / "2-on-policy_report.html").stat().st_size > 0


def _calls(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every model call's last output item (the one carrying its token ids)."""
    return [
        item
        for row in rows
        for item in row["response"]["output"]
        if item.get("generation_token_ids") is not None
    ]


TRAINER_PROBE = """
import json, sys
from pathlib import Path
sys.path.insert(0, "bench")
import torch
import pg_train_step as t

model, _ = t.load(Path("models/tiny-weather"), Path("models/tiny-weather"))
settings = t.Settings(lr=1e-4, clip=0.2, max_lag=1, scale_by_std=False)
prompt, generated = [1, 2, 3, 4], [5, 6, 7]
own = t.token_logprobs(model, [t.Call(prompt, generated, None, 0.0)])[0].tolist()

def row(reward, start, *, prompt=prompt, stale=False, shift=0.0):
    item = {"prompt_token_ids": prompt, "generation_token_ids": generated,
            "generation_log_probs": [lp + shift for lp in own]}
    versions = {"start": start, "end": start, **({"stale": True} if stale else {})}
    return {"reward": reward, "weight_version": versions, "response": {"output": [item]}}

rows = [row(1.0, 10), row(0.0, 10), row(0.0, 9), row(1.0, 8), row(1.0, 10, stale=True),
        row(1.0, 10, prompt=[9, 9]), row(1.0, 10, prompt=[9, 9])]
calls, figures = t.select(rows, 10, settings)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
on_policy = t.grpo_step(model, optimizer, [t.select([row(1.0, 10), row(0.0, 10)], 10, settings)[0][0]], settings)
behind = t.grpo_step(model, optimizer, [t.select([row(1.0, 9, shift=-5.0), row(0.0, 9)], 10, settings)[0][0]], settings)
print(json.dumps({"advantages": [c.advantage for c in calls], "figures": figures,
                  "on_policy": on_policy, "behind": behind}))
"""


@pytest.mark.engine
def test_the_trainer_corrects_rows_of_the_previous_version_and_drops_older_ones() -> None:
    """The async loop's rule, in `pg_train_step.py`: a row one version behind the trainer is
    kept and weighted by its importance ratio (clipped), older or `stale` rows are dropped, and a
    group (one prompt's samples) whose rewards are all equal teaches nothing."""
    require_vllm_env()
    from ng_cli.toolchain.local_vllm import vllm_venv_python

    done = subprocess.run(
        [str(vllm_venv_python()), "-c", TRAINER_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    figures = probe["figures"]
    # Kept: the three rows of versions 10, 10 and 9 (one behind); dropped: 8 (two behind) and the stale one.
    assert (figures["rows"], figures["dropped_stale"], figures["rows_behind"]) == (7, 2, 1)
    assert (figures["groups"], figures["learning_groups"]) == (2, 1)  # [9, 9]'s samples both scored 1
    assert probe["advantages"] == pytest.approx([2 / 3, -1 / 3, -1 / 3])  # reward - its group's mean
    assert probe["on_policy"]["clipped_tokens"] == 0
    assert probe["on_policy"]["largest_logprob_gap"] < 1e-3  # the trainer's logprobs are the rows'
    assert probe["behind"]["clipped_tokens"] == 3  # made by other weights: ratio e^5, clipped
