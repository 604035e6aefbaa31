"""An upstream outage in the middle of a run: the time lost beyond the outage, and rollouts lost.

    .venv/bin/python bench/upstream_outage.py [--rollouts 1200] [--outage-s 60] [--kill-at-s 20]

The real chain, every piece a real process: `ng_run` (vllm_model with its default budgets,
simple_agent, example_single_tool_call) over a stub vLLM (tests/fixtures/stub_vllm.py, each
generation `--delay-s` long), and `ng_collect_rollouts` with its defaults. First a baseline run
without an outage; then the same run, with the stub SIGKILLed `--kill-at-s` seconds in and
restarted on the same port `--outage-s` seconds later (an RL trainer restarting its engine).

    time lost beyond the outage = outage run - baseline run - outage
    rollouts lost               = rollouts missing from the output after the run (and after one
                                  resume, run only if the first pass left failures)

Prints a table and writes bench/results/upstream_outage.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _options import add_out_option
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the stub and the chain helpers live under tests/fixtures

from tests.fixtures.real_chain import AGENT, stack_yaml, start_stack, wait_for_model, write_rows  # noqa: E402
from tests.fixtures.stack.harness import NgRun  # noqa: E402
from tests.fixtures.stub_vllm import StubProcess  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "upstream_outage.json"
KEY = "bench-key-0123456789"


@dataclass
class Pass:
    """One collector run over the same input."""

    wall_s: float
    exit_code: int
    scored: int
    failed: int
    failure_kinds: dict[str, int]


def collect(run: NgRun, workdir: Path, output: str, parallel: int) -> subprocess.Popen[str]:
    env = {**os.environ, "NG_ENV_YAML": str(workdir / "env.yaml"), "COLUMNS": "200"}
    command = [
        str(Path(sys.executable).with_name("ng_collect_rollouts")),
        f"+agent_name={AGENT}",
        f"+head_server_url={run.stack['head_url']}",
        "+input_jsonl_fpath=in.jsonl",
        f"+output_jsonl_fpath={output}",
        f"+num_samples_in_parallel={parallel}",
        "+progress_interval_s=10",
    ]
    return subprocess.Popen(
        command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen[str], started: float, workdir: Path, output: str) -> Pass:
    _, stderr = process.communicate(timeout=3600)
    wall_s = time.monotonic() - started
    stem = output.removesuffix(".jsonl")
    rows = (workdir / output).read_text().splitlines() if (workdir / output).exists() else []
    failures_path = workdir / f"{stem}_failures.jsonl"
    failures = (
        [json.loads(line) for line in failures_path.read_text().splitlines()]
        if failures_path.exists()
        else []
    )
    kinds: dict[str, int] = {}
    for failure in failures:
        kinds[failure["kind"]] = kinds.get(failure["kind"], 0) + 1
    if process.returncode not in (0, 1):
        print(stderr[-3000:], file=sys.stderr)
    return Pass(wall_s, process.returncode, len(rows), len(failures), kinds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=1200)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--delay-s", type=float, default=0.5, help="each stub generation takes this long")
    parser.add_argument("--outage-s", type=float, default=60.0)
    parser.add_argument("--kill-at-s", type=float, default=20.0)
    add_out_option(parser, RESULTS)
    args = parser.parse_args()

    console = Console()
    with tempfile.TemporaryDirectory(prefix="ng-bench-outage-") as tmp:
        workdir = Path(tmp)
        (workdir / "env.yaml").write_text("{}\n")
        write_rows(workdir / "in.jsonl", args.rollouts)
        stub = StubProcess(api_key=KEY, delay_s=args.delay_s)
        run = start_stack(workdir, stack_yaml(stub.base_url), api_key=KEY)
        restarted: StubProcess | None = None
        try:
            console.print(f"baseline: {args.rollouts} rollouts, no outage ...")
            started = time.monotonic()
            baseline = finish(
                collect(run, workdir, "baseline.jsonl", args.parallel), started, workdir, "baseline.jsonl"
            )

            console.print(
                f"outage: kill the upstream at {args.kill_at_s:g} s, restart it {args.outage_s:g} s later ..."
            )
            started = time.monotonic()
            process = collect(run, workdir, "outage.jsonl", args.parallel)
            time.sleep(args.kill_at_s)
            stub.kill()
            killed_at = time.monotonic()
            time.sleep(args.outage_s)
            restarted = StubProcess(api_key=KEY, port=stub.port, delay_s=args.delay_s)
            restarted_at = time.monotonic()
            outage = finish(process, started, workdir, "outage.jsonl")
            resume: Pass | None = None
            if outage.scored < args.rollouts:
                wait_for_model(run)
                resumed_at = time.monotonic()
                resume = finish(
                    collect(run, workdir, "outage.jsonl", args.parallel), resumed_at, workdir, "outage.jsonl"
                )
        finally:
            run.kill_everything()
            stub.kill()
            if restarted is not None:
                restarted.kill()

    outage_s = restarted_at - killed_at
    final_scored = resume.scored if resume is not None else outage.scored
    lost_beyond_s = outage.wall_s - baseline.wall_s - outage_s
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "settings": {key: value for key, value in vars(args).items() if key != "out"}
        | {"model_server": "vllm_model defaults", "collector": "defaults"},
        "baseline": asdict(baseline),
        "outage_run": asdict(outage),
        "resume": asdict(resume) if resume is not None else None,
        "outage_s": round(outage_s, 2),
        "time_lost_beyond_outage_s": round(lost_beyond_s, 2),
        "rollouts_lost_after_run": args.rollouts - outage.scored,
        "rollouts_lost_after_resume": args.rollouts - final_scored,
    }
    table = Table(
        title=f"upstream outage ({args.rollouts} rollouts, {args.parallel} in parallel)", title_justify="left"
    )
    for column in ("run", "wall (s)", "scored", "failed", "failure kinds"):
        table.add_column(column, justify="left" if column in ("run", "failure kinds") else "right")
    for name, one in (("baseline", baseline), ("with outage", outage), ("resume", resume)):
        if one is not None:
            table.add_row(
                name, f"{one.wall_s:.1f}", str(one.scored), str(one.failed), json.dumps(one.failure_kinds)
            )
    console.print(table)
    console.print(
        f"outage {outage_s:.1f} s; time lost beyond the outage {lost_beyond_s:.1f} s; rollouts lost after the run "
        f"{result['rollouts_lost_after_run']}, after a resume {result['rollouts_lost_after_resume']}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
