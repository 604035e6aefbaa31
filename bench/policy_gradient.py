"""A real on-policy RL loop on CPU: collect -> policy-gradient step -> ng_update_weights -> collect.

    .venv/bin/python bench/policy_gradient.py [--steps 12] [--rollouts 64] [--noise 0.6] [--lr 3e-4]

`ng_run` serves the embedded model on the CPU engine with `weight_updates: true` and token ids on.
The policy starts weak: the embedded model with Gaussian noise on every matrix (`--noise` times
each matrix's own standard deviation; `bench/pg_train_step.py --noise`), loaded as version 1.
Each step collects `--rollouts` weather rollouts at temperature 1 (the example rows), takes one
REINFORCE step on them (`bench/pg_train_step.py`, torch on CPU, under the engine venv: the exact
token ids the engine sampled, advantage = reward - batch mean), and loads the result into the
engines as the next version, while nothing else runs. Every row says which version made it, so
the loop checks it is on-policy (staleness 0) as it goes.

Prints the mean reward per step and writes bench/results/policy_gradient.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the stack harness lives under tests/fixtures

from ng_cli.toolchain.local_vllm import default_engine_python  # noqa: E402
from ng_cli.training import WeightsClient  # noqa: E402
from tests.fixtures.engine_stack import ENGINE_KEY, EXAMPLE_ENV_CONFIG, engine_stack  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "policy_gradient.json"
CPU_CONFIG = "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml"
MODEL = ROOT / "models" / "tiny-weather"
TRAIN_STEP = ROOT / "bench" / "pg_train_step.py"


def train(args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [default_engine_python(), str(TRAIN_STEP), "--base", str(MODEL), *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"train step failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=int, default=12, help="training steps (0: the noisy start served and measured once)"
    )
    parser.add_argument("--rollouts", type=int, default=64)
    parser.add_argument("--noise", type=float, default=0.6)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    repeats = -(-args.rollouts // 5)  # the 5 example rows
    history: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ng-pg-") as tmp_name:
        tmp = Path(tmp_name)
        overrides = [
            f"++{ENGINE_KEY}.weight_updates=true",
            f"++{ENGINE_KEY}.return_token_id_information=true",
        ]
        with engine_stack(tmp / "stack", [EXAMPLE_ENV_CONFIG, CPU_CONFIG], overrides) as stack:
            client = WeightsClient.connect(stack.process.head_url)
            weights = tmp / "v1"
            train(["--weights", str(MODEL), "--noise", str(args.noise), "--out", str(weights)])
            client.update(str(weights), version=1)
            for step in range(1, args.steps + 2):  # the last pass only measures
                started = time.perf_counter()
                name = f"step{step}"
                collector = stack.collect(name, repeats, parallel=32, max_tokens=64,
                                          extra=["+responses_create_params.temperature=1.0"])  # fmt: skip
                out, _ = collector.communicate(timeout=1800)
                if collector.returncode != 0:
                    raise SystemExit(out[-3000:])
                rows = stack.rows(name)
                versions = {row["weight_version"]["start"] for row in rows} | {
                    row["weight_version"]["end"] for row in rows
                }
                assert versions == {step}, f"off-policy rows in step {step}: versions {versions}"
                mean = sum(row["reward"] for row in rows) / len(rows)
                entry: dict[str, Any] = {
                    "version": step,
                    "rollouts": len(rows),
                    "mean_reward": round(mean, 4),
                }
                if step <= args.steps:
                    following = tmp / f"v{step + 1}"
                    stats = train(["--weights", str(weights), "--rollouts", str(stack.tmp / f"{name}.jsonl"),
                                   "--lr", str(args.lr), "--out", str(following)])  # fmt: skip
                    update = client.update(str(following), version=step + 1)
                    entry.update(train=stats, update_window_s=update["window_s"])
                    weights = following
                entry["seconds"] = round(time.perf_counter() - started, 1)
                history.append(entry)
                print(json.dumps(entry), flush=True)
    record = {"noise": args.noise, "lr": args.lr, "rollouts_per_step": 5 * repeats, "steps": history}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2))
    table = Table(title="on-policy REINFORCE on the embedded model (CPU)", title_justify="left")
    for column in ("version", "rollouts", "mean reward", "train s", "update window s"):
        table.add_column(column, justify="right")
    for entry in history:
        train_s = entry.get("train", {}).get("seconds")
        table.add_row(
            str(entry["version"]), str(entry["rollouts"]), f"{entry['mean_reward']:.3f}",
            "-" if train_s is None else f"{train_s:.1f}",
            "-" if "update_window_s" not in entry else f"{entry['update_window_s']:.3f}",
        )  # fmt: skip
    Console().print(table)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
