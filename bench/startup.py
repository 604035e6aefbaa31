"""Start-up benchmark: wall time from launching `ng_run` to every server answering /health.

    .venv/bin/python bench/startup.py [--runs 5] [--stack example|fixture|engines] [--compare-ray]

`example` is the README's stack: the example_single_tool_call environment, its simple_agent and
a vllm_model `policy_model`. The model server checks its upstream at start, so a stub
OpenAI-compatible endpoint (`GET /v1/models` only) runs in this process and env.yaml is a
temporary file pointing at it. `fixture` is the launcher tests' stack (tests/fixtures/stack:
head + 4 servers). Each run measures from `Popen` to ng_run writing its ready file (so Python
start-up, config composition, spawn and every child's imports are included), then stops the
stack with SIGINT. Prints a table (each run + median) and writes bench/results/startup.json.
Target: median < 3 s on a 2-core machine.

`--compare-ray` runs every start twice, as plain processes and on a private Ray cluster
(`++ray.address=local ++ray.servers=all`: every server an actor), and prints them side by side:
time to all ready and the memory of everything the run started (RSS and PSS summed over ng_run
and every process below it: its children, Ray's own processes, the engines and their EngineCores);
writes bench/results/startup_ray.json (`startup_ray_<stack>.json` for the others). `engines` is the quick start's stack with two CPU vLLM
engines of models/tiny-weather (local_vllm_model) instead of the stub model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "startup.json"
RAY_RESULTS = ROOT / "bench" / "results" / "startup_ray.json"
MARKER_VAR = "NG_BENCH_MARKER"
ON_RAY = ["++ray.address=local", "++ray.servers=all"]
ENGINE_CONFIGS = [
    "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
    "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml",
]
ENGINE_OVERRIDES = [
    "++policy_model.responses_api_models.local_vllm_model.vllm_serve_kwargs.data_parallel_size=2"
]
NG_RUN = Path(sys.executable).with_name("ng_run")
MODEL_NAME = "bench-model"
EXAMPLE_CONFIGS = [
    "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
    "responses_api_models/vllm_model/configs/vllm_model.yaml",
]
TARGET_MEDIAN_S = 3.0


class _Models(BaseHTTPRequestHandler):
    """Just enough of an OpenAI-compatible server for vllm_model's start-up check."""

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": MODEL_NAME, "object": "model"}]}).encode()
        self.send_response(200 if self.path.endswith("/models") else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@contextmanager
def stub_model_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def stack_command(
    stack: str, ready_file: Path, *, on_ray: bool = False, src: Path | None = None
) -> tuple[list[str], dict[str, str], Path]:
    """argv, environment and cwd for one ng_run of the chosen stack (of the tree `src`, else this one)."""
    if src is not None:  # ahead of the editable install's finder, which comes last on sys.meta_path
        argv, env, cwd = stack_command(stack, ready_file, on_ray=on_ray)
        env["PYTHONPATH"] = str(src)
        if "NG_REPO_ROOT" in env:
            env["NG_REPO_ROOT"] = str(src / Path(env["NG_REPO_ROOT"]).relative_to(ROOT))
        return argv, env, src / cwd.relative_to(ROOT)
    env = dict(os.environ)
    common = ["++head_server.port=0", f"+ready_file={ready_file}", *(ON_RAY if on_ray else [])]
    if stack == "fixture":
        root = ROOT / "tests" / "fixtures" / "stack"
        env["NG_REPO_ROOT"] = str(root)
        env.pop("NG_ENV_YAML", None)
        return [str(NG_RUN), "-c", "configs/stack.yaml", *common], env, root
    env.pop("NG_REPO_ROOT", None)
    if stack == "engines":
        return (
            [str(NG_RUN), f"+config_paths=[{','.join(ENGINE_CONFIGS)}]", *ENGINE_OVERRIDES, *common],
            env,
            ROOT,
        )
    return [str(NG_RUN), f"+config_paths=[{','.join(EXAMPLE_CONFIGS)}]", *common], env, ROOT


def _run_pids(root: int, marker: str) -> set[int]:
    """ng_run and every descendant, plus any process whose environment carries `marker` (one that
    left the tree). Descendants matter: vLLM's EngineCore retitles itself (setproctitle), which
    can overwrite the environment block /proc shows, so a marker scan alone misses it."""
    needle = f"{MARKER_VAR}={marker}".encode()
    parents: dict[int, int] = {}
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.add(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    tree = {root}
    grown = True
    while grown:
        grown = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grown = True
    return tree | found


def memory_of(root: int, marker: str) -> dict[str, Any]:
    """RSS and PSS (MiB) summed over every process of the run (`_run_pids`)."""
    rss_kib = pss_kib = processes = 0
    by_kind: dict[str, float] = {}
    for pid in _run_pids(root, marker):
        entry = Path(f"/proc/{pid}")
        try:
            fields = dict(
                line.split(":", 1)
                for line in (entry / "smaps_rollup").read_text().splitlines()[1:]
                if ":" in line
            )
        except OSError:
            continue
        rss_kib += int(fields["Rss"].split()[0])
        pss_kib += int(fields["Pss"].split()[0])
        processes += 1
        kind = _kind(entry)
        by_kind[kind] = by_kind.get(kind, 0.0) + int(fields["Pss"].split()[0]) / 1024
    return {
        "rss_mib": round(rss_kib / 1024, 1),
        "pss_mib": round(pss_kib / 1024, 1),
        "os_processes": processes,
        "pss_mib_by_kind": {
            kind: round(mib, 1) for kind, mib in sorted(by_kind.items(), key=lambda kv: -kv[1])
        },
    }


def _kind(entry: Path) -> str:
    """What a process is, in short: `vllm engine`, `ray::_ProcessHost`, `raylet`, `server child`."""
    try:
        argv = [
            part.decode(errors="replace") for part in (entry / "cmdline").read_bytes().split(b"\0") if part
        ]
    except OSError:
        return "?"
    if not argv:
        return "?"
    text = " ".join(argv)
    for needle, kind in (("engine_main.py", "vllm engine"), ("EngineCore", "vllm EngineCore"),
                         ("ng_cli.servers.child", "server child"), ("ng_run", "ng_run (head, driver)"),
                         ("resource_tracker", "vllm resource_tracker"), ("sys.stdin.buffer.read()", "ray actor watchdog")):  # fmt: skip
        if needle in text:
            return kind
    if argv[0].startswith("ray::"):
        return argv[0]
    script = next((part for part in argv[1:] if part.endswith(".py")), argv[0])
    return Path(script).name


def measure_once(
    stack: str, work: Path, run: int, env_yaml: Path | None, *, on_ray: bool = False, src: Path | None = None
) -> dict[str, Any]:
    """One cold start: seconds until the ready file exists, plus ng_run's per-server times."""
    ready_file = work / f"ready-{run}-{'ray' if on_ray else 'local'}{'-base' if src else ''}.json"
    argv, env, cwd = stack_command(stack, ready_file, on_ray=on_ray, src=src)
    marker = uuid.uuid4().hex
    env[MARKER_VAR] = marker
    if env_yaml is not None:
        env["NG_ENV_YAML"] = str(env_yaml)
    limit_s = 900 if stack == "engines" else 120
    log = (work / f"ng_run-{run}.log").open("w")
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        while not ready_file.exists():
            if process.poll() is not None:
                raise SystemExit(f"ng_run exited with {process.returncode}; see {log.name}")
            if time.perf_counter() - started > limit_s:
                raise SystemExit(f"not ready after {limit_s} s; see {log.name}")
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        ready = json.loads(ready_file.read_text())
        memory = memory_of(process.pid, marker)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
    return {
        "run": run,
        "tree": "baseline" if src else "this",
        "backend": "ray" if on_ray else "local",
        "ready_s": round(elapsed, 3),
        "processes": len(ready["servers"]) + len(ready.get("engines", [])) + 1,
        "per_server_s": {name: round(seconds, 3) for name, seconds in ready["ready_s"].items()},
        **memory,
    }


def report_side_by_side(runs: list[dict[str, Any]], stack: str) -> dict[str, Any]:
    """Local processes vs Ray actors: each run, then medians and what Ray costs."""
    table = Table(
        title=f"ng_run start-up, {stack} stack: local processes vs Ray (ray.address: local)",
        title_justify="left",
    )
    for column in (
        "run",
        "backend",
        "time to all ready (s)",
        "RSS sum (MiB)",
        "PSS sum (MiB)",
        "OS processes",
    ):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for run in runs:
        table.add_row(str(run["run"]), run["backend"], f"{run['ready_s']:.2f}", f"{run['rss_mib']:.0f}",
                      f"{run['pss_mib']:.0f}", str(run["os_processes"]))  # fmt: skip
    summary: dict[str, dict[str, float]] = {}
    for backend in ("local", "ray"):
        mine = [run for run in runs if run["backend"] == backend]
        summary[backend] = {
            key: round(statistics.median(run[key] for run in mine), 2)
            for key in ("ready_s", "rss_mib", "pss_mib", "os_processes")
        }
        row = summary[backend]
        table.add_row("median", backend, f"[bold]{row['ready_s']:.2f}[/bold]", f"{row['rss_mib']:.0f}",
                      f"{row['pss_mib']:.0f}", f"{row['os_processes']:.0f}")  # fmt: skip
    cost = {key: round(summary["ray"][key] - summary["local"][key], 2) for key in summary["local"]}
    table.add_row("Ray costs", "+", f"{cost['ready_s']:+.2f}", f"{cost['rss_mib']:+.0f}", f"{cost['pss_mib']:+.0f}",
                  f"{cost['os_processes']:+.0f}")  # fmt: skip
    Console().print(table)
    return {
        "benchmark": "ng_run time to all ready and memory: local processes vs Ray actors",
        "stack": stack,
        "ray_overrides": ON_RAY,
        "runs": runs,
        "median": summary,
        "ray_costs": cost,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m": os.getloadavg()[0],
        },
    }


IMPORT_MODULES = (
    "ng_cli.commands.run",
    "ng_cli.config.command_options",
    "ng_cli.upstream.client",
    "fastapi",
    "aiohttp",
)
"""The modules whose cumulative import time (`python -X importtime`) is reported for ng_run."""


def import_times(src: Path | None, *, repeats: int = 3) -> dict[str, float]:
    """Median cumulative ms of importing `ng_cli.commands.run` and the heavy parts it used to pull in
    (0: not imported at all); less noisy than the wall time on a loaded machine."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    samples: dict[str, list[float]] = {name: [] for name in IMPORT_MODULES}
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import ng_cli.commands.run"],
            env=env, cwd=src or ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        found = {}
        for line in done.stderr.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[2].strip() in samples:
                found[parts[2].strip()] = int(parts[1]) / 1000
        for name in samples:
            samples[name].append(found.get(name, 0.0))
    return {name: round(statistics.median(values), 1) for name, values in samples.items()}


def report_against_baseline(runs: list[dict[str, Any]], stack: str, baseline: Path) -> dict[str, Any]:
    """This tree vs `baseline`, interleaved: wall time to ready (median) and import times."""
    imports = {"this": import_times(None), "baseline": import_times(baseline)}
    table = Table(
        title=f"ng_run start-up, {stack} stack: this tree vs {baseline} (interleaved)", title_justify="left"
    )
    for column in ("tree", "median s to ready", "runs (s)", *(f"import {m} ms" for m in IMPORT_MODULES)):
        table.add_column(column, justify="left" if column == "tree" else "right")
    medians = {}
    for tree in ("baseline", "this"):
        mine = [run["ready_s"] for run in runs if run["tree"] == tree]
        medians[tree] = round(statistics.median(mine), 3)
        table.add_row(tree, f"[bold]{medians[tree]:.2f}[/bold]", " ".join(f"{s:.2f}" for s in mine),
                      *(f"{imports[tree][m]:.0f}" for m in IMPORT_MODULES))  # fmt: skip
    Console().print(table)
    return {
        "benchmark": "ng_run time to all ready, this tree vs a baseline tree, interleaved",
        "stack": stack,
        "baseline": str(baseline),
        "runs": runs,
        "median_s": medians,
        "import_ms": imports,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m": os.getloadavg()[0],
        },
    }


def report(runs: list[dict[str, Any]], stack: str) -> dict[str, Any]:
    median = statistics.median(run["ready_s"] for run in runs)
    table = Table(title=f"ng_run start-up, {stack} stack (launch -> all /health ready)", title_justify="left")
    table.add_column("run", justify="right")
    table.add_column("processes", justify="right")
    table.add_column("time to ready (s)", justify="right")
    table.add_column("slowest server (s, from stack start)")
    for run in runs:
        name, seconds = max(run["per_server_s"].items(), key=lambda item: item[1])
        table.add_row(
            str(run["run"]), str(run["processes"]), f"{run['ready_s']:.2f}", f"{name} {seconds:.2f}"
        )
    verdict = "[green]meets[/green]" if median < TARGET_MEDIAN_S else "[red]misses[/red]"
    table.add_row("median", "", f"[bold]{median:.2f}[/bold]", f"{verdict} the {TARGET_MEDIAN_S:.0f} s target")
    Console().print(table)
    return {
        "benchmark": "ng_run time to all ready",
        "stack": stack,
        "configs": EXAMPLE_CONFIGS if stack == "example" else ["tests/fixtures/stack/configs/stack.yaml"],
        "runs": runs,
        "median_s": round(median, 3),
        "target_median_s": TARGET_MEDIAN_S,
        "meets_target": median < TARGET_MEDIAN_S,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m": os.getloadavg()[0],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stack", choices=["example", "fixture", "engines"], default="example")
    parser.add_argument("--compare-ray", action="store_true", help="each run as local processes and on Ray")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="a source tree to compare with, run for run (e.g. git archive of a commit)",
    )
    parser.add_argument(
        "--out", type=Path, help="the results file (default: startup.json or startup_ray*.json)"
    )
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ng-bench-") as scratch, stub_model_endpoint() as base_url:
        work = Path(scratch)
        env_yaml = None
        if options.stack == "example":
            env_yaml = work / "env.yaml"
            env_yaml.write_text(
                f"policy_base_url: {base_url}\npolicy_api_key: sk-bench-not-secret\npolicy_model_name: {MODEL_NAME}\n"
            )
        if options.baseline_src:
            runs = [
                measure_once(options.stack, work, run, env_yaml, src=src)
                for run in range(1, options.runs + 1)
                for src in (options.baseline_src, None)  # interleaved: the machine's load hits both alike
            ]
        elif options.compare_ray:
            runs = [
                measure_once(options.stack, work, run, env_yaml, on_ray=on_ray)
                for run in range(1, options.runs + 1)
                for on_ray in (False, True)  # interleaved: the machine's load hits both alike
            ]
        else:
            runs = [measure_once(options.stack, work, run, env_yaml) for run in range(1, options.runs + 1)]
    if options.baseline_src:
        result, path = report_against_baseline(runs, options.stack, options.baseline_src), RESULTS
    elif options.compare_ray:
        suffix = "" if options.stack == "example" else f"_{options.stack}"
        result, path = (
            report_side_by_side(runs, options.stack),
            RAY_RESULTS.with_stem(RAY_RESULTS.stem + suffix),
        )
    else:
        result, path = report(runs, options.stack), RESULTS
    path = options.out or path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    Console().print(f"wrote {path}")


if __name__ == "__main__":
    main()
