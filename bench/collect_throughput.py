"""Collector throughput: rollouts/s and CPU-seconds per rollout, per process, by concurrency.

    .venv/bin/python bench/collect_throughput.py [--levels 1,16,64,256,1024] [--scale 1.0]

The real chain for `example_single_tool_call`, each piece in its own process so its CPU can be
read from /proc/<pid>/stat:

    collector (this process) -> simple_agent -> example_single_tool_call (seed, tool, verify)
                                             -> stub model (tests/fixtures/rollouts/stub_model.py)

The agent and the environment are started the way `ng_run` starts them (`python -m
ng_cli.servers.child <spec>` on a socket bound here); the stub model answers `/v1/responses`
at once (a tool call, then the right answer), so every rollout should earn reward 1.0 and the
numbers show our own overhead, not a model's. Each level runs a bounded number of rollouts
(`--scale` multiplies them). Prints a table and writes bench/results/collect_throughput.json,
including which process is the bottleneck (the one using the most CPU per rollout) and how much
of the machine all of them use together.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from _options import add_out_option
from rich.console import Console
from rich.table import Table

from ng_cli.launcher.ports import bind_listener
from ng_cli.rollouts import CollectConfig, collect_rollouts
from ng_cli.rollouts.progress import NullView
from ng_cli.servers.spec import ServerAddress, ServerSpec, write_spec

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "collect_throughput.json"
STUB_MODEL = ROOT / "tests" / "fixtures" / "rollouts" / "stub_model.py"
ENV_DIR = ROOT / "resources_servers" / "example_single_tool_call"
AGENT_APP = ROOT / "responses_api_agents" / "simple_agent" / "app.py"
ROLLOUTS_AT = {1: 150, 16: 1000, 64: 2000, 256: 3000, 1024: 4000}
"""Rollouts per concurrency level: enough for a steady rate, few enough for a few minutes in all."""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    name: str
    url: str
    process: subprocess.Popen[bytes]


def cpu_s(pid: int | str) -> float:
    """User + system CPU seconds of a process so far (all its threads), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime: fields 14 and 15


def machine_busy_s() -> float:
    """CPU seconds all processes of the machine spent busy so far (from /proc/stat)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLOCK_TICKS


def start_stub_model() -> Server:
    process = subprocess.Popen([sys.executable, str(STUB_MODEL), "--port", "0"], stdout=subprocess.PIPE)
    assert process.stdout is not None
    match = re.match(rb"PORT (\d+)", process.stdout.readline())
    if not match:
        process.kill()
        raise RuntimeError("the stub model did not start")
    return Server("stub model", f"http://127.0.0.1:{int(match.group(1))}", process)


def start_child(name: str, server_type: str, app: Path, config: dict[str, Any], *, run_dir: Path,
                servers: dict[str, ServerAddress], secret: str) -> Server:  # fmt: skip
    """One server the way ng_run starts it: a 0600 spec file and an inherited listening socket."""
    sock = bind_listener("127.0.0.1", 0, owner=name)
    port = sock.getsockname()[1]
    spec = ServerSpec(
        name=name, server_type=server_type, implementation=app.parent.name, app_path=str(app),
        config={"entrypoint": "app.py", **config}, port=port, listen_fd=sock.fileno(),
        servers=servers, session_secret=secret,
    )  # fmt: skip
    spec_path = run_dir / f"{name}.json"
    write_spec(spec, spec_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "ng_cli.servers.child", str(spec_path)], pass_fds=[sock.fileno()], cwd=ROOT
    )
    sock.close()
    return Server(name, f"http://127.0.0.1:{port}", process)


def wait_healthy(servers: list[Server], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    for server in servers:
        while True:
            try:
                with urllib.request.urlopen(f"{server.url}/health", timeout=1):
                    break
            except OSError:
                if server.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{server.name} did not get ready") from None
                time.sleep(0.05)


@contextmanager
def chain(run_dir: Path) -> Iterator[list[Server]]:
    """The stub model, the environment and the agent; stopped (SIGTERM, then SIGKILL) on exit."""
    secret = secrets.token_hex(16)
    with ExitStack() as stack:
        model = start_stub_model()
        started = [model]
        stack.callback(_stop, started)
        env = start_child("example_single_tool_call", "resources_servers", ENV_DIR / "app.py",
                          {"domain": "agent"}, run_dir=run_dir, servers={}, secret=secret)  # fmt: skip
        started.append(env)
        servers = {
            env.name: ServerAddress(server_type="resources_servers", implementation=env.name, url=env.url),
            "policy_model": ServerAddress(
                server_type="responses_api_models", implementation="stub", url=model.url
            ),
        }
        block = {
            "resources_server": {"type": "resources_servers", "name": env.name},
            "model_server": {"type": "responses_api_models", "name": "policy_model"},
        }
        agent = start_child("simple_agent", "responses_api_agents", AGENT_APP, block,
                            run_dir=run_dir, servers=servers, secret=secret)  # fmt: skip
        started.append(agent)
        wait_healthy(started)
        yield [agent, env, model]


def _stop(servers: list[Server]) -> None:
    for server in servers:
        server.process.terminate()
    for server in servers:
        try:
            server.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


def write_input(path: Path, num_rows: int) -> Path:
    examples = (ENV_DIR / "data" / "example.jsonl").read_bytes().splitlines()
    path.write_bytes(b"".join(examples[i % len(examples)] + b"\n" for i in range(num_rows)))
    return path


def run_level(concurrency: int, total: int, servers: list[Server], run_dir: Path) -> dict[str, Any]:
    """Collect `total` rollouts at `concurrency`; rate and CPU seconds per rollout per process."""
    agent = servers[0]
    config = CollectConfig(
        agent_name="simple_agent",
        agent_urls={"simple_agent": agent.url},
        input_jsonl_fpath=write_input(run_dir / f"in_{concurrency}.jsonl", total),
        output_jsonl_fpath=run_dir / f"out_{concurrency}.jsonl",
        num_samples_in_parallel=concurrency,
        rollout_timeout_s=300,
        overwrite=True,
    )
    before = {"collector": cpu_s("self"), **{s.name: cpu_s(s.process.pid) for s in servers}}
    machine_before = machine_busy_s()
    started = time.perf_counter()
    result = asyncio.run(collect_rollouts(config, view=NullView()))
    elapsed_s = time.perf_counter() - started
    machine_s = machine_busy_s() - machine_before
    after = {"collector": cpu_s("self"), **{s.name: cpu_s(s.process.pid) for s in servers}}
    cpu = {name: after[name] - before[name] for name in before}
    done = max(result.succeeded, 1)
    return {
        "concurrency": concurrency,
        "rollouts": result.succeeded,
        "failed": result.failed,
        "mean_reward": result.metrics["mean_reward"],
        "elapsed_s": round(elapsed_s, 3),
        "rollouts_per_s": round(result.succeeded / elapsed_s, 1),
        "cpu_ms_per_rollout": {name: round(1000 * seconds / done, 3) for name, seconds in cpu.items()},
        "cpu_cores_used": {name: round(seconds / elapsed_s, 2) for name, seconds in cpu.items()},
        "other_processes_cores": round(max(0.0, machine_s - sum(cpu.values())) / elapsed_s, 2),
    }


def bottleneck(level: dict[str, Any]) -> str:
    """Which process spends the most CPU per rollout, and how busy the machine was."""
    busiest = max(level["cpu_cores_used"], key=level["cpu_cores_used"].get)
    cores = level["cpu_cores_used"]
    per_rollout_ms = sum(level["cpu_ms_per_rollout"].values())
    ceiling = (os.cpu_count() or 1) * 1000 / per_rollout_ms if per_rollout_ms else 0.0
    return (
        f"at concurrency {level['concurrency']}: {busiest} uses the most CPU "
        f"({level['cpu_ms_per_rollout'][busiest]:.2f} of {per_rollout_ms:.2f} ms per rollout, {cores[busiest]:.2f} "
        f"cores); the chain used {sum(cores.values()):.2f} of {os.cpu_count()} cores and other processes "
        f"{level['other_processes_cores']:.2f}; CPU-bound ceiling with the machine to itself: ~{ceiling:.0f} rollouts/s"
    )


def render(levels: list[dict[str, Any]], console: Console) -> None:
    names = list(levels[0]["cpu_ms_per_rollout"])
    table = Table(title="ng_collect_rollouts throughput, example_single_tool_call + stub model")
    for header in ("parallel", "rollouts", "failed", "reward", "s", "rollouts/s"):
        table.add_column(header, justify="right")
    for name in names:
        table.add_column(f"{name}\nCPU ms/rollout", justify="right")
    table.add_column("cores used", justify="right")
    table.add_column("others' cores", justify="right")
    for level in levels:
        table.add_row(
            str(level["concurrency"]), str(level["rollouts"]), str(level["failed"]),
            f"{level['mean_reward'] or 0:.3f}", f"{level['elapsed_s']:.1f}", f"{level['rollouts_per_s']:.1f}",
            *(f"{level['cpu_ms_per_rollout'][name]:.2f}" for name in names),
            f"{sum(level['cpu_cores_used'].values()):.2f}", f"{level['other_processes_cores']:.2f}",
        )  # fmt: skip
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--levels", default=",".join(map(str, ROLLOUTS_AT)), help="concurrency levels")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the rollouts per level")
    add_out_option(parser, RESULTS)
    args = parser.parse_args()
    console = Console(width=150)
    levels = []
    with tempfile.TemporaryDirectory(prefix="ng_bench_collect-") as tmp, chain(Path(tmp)) as servers:
        for concurrency in (int(level) for level in args.levels.split(",")):
            total = max(10, int(ROLLOUTS_AT.get(concurrency, 2000) * args.scale))
            levels.append(run_level(concurrency, total, servers, Path(tmp)))
            console.print(f"concurrency {concurrency}: {levels[-1]['rollouts_per_s']} rollouts/s")
    render(levels, console)
    findings = [bottleneck(level) for level in levels]
    for finding in findings:
        console.print(finding)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(
        orjson.dumps(
            {
                "benchmark": "ng_collect_rollouts throughput",
                "chain": "collector -> simple_agent -> example_single_tool_call + stub model (/v1/responses)",
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                },
                "levels": levels,
                "bottleneck": findings,
            },
            option=orjson.OPT_INDENT_2,
        )
    )
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
