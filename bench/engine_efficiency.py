"""Generated tokens/s of an engine driven directly vs through the model server, same prompts, interleaved.

    direct   a raw aiohttp client -> the engine's /v1/chat/completions, with the exact chat body
             the model server would send (built by the same conversion code)
    model    the same client -> local_vllm_model's /v1/responses -> the same engine
    stack    (--stack) ng_collect_rollouts -> simple_agent -> local_vllm_model -> the same engine,
             the same prompts as rows of the example environment (tokens/s as the collector
             measures it: its own output tokens over its elapsed time)

ng_run starts the stack from config (the engine through local_vllm_model, the product's path):
by default the CPU engine of models/tiny-weather (responses_api_models/local_vllm_model/configs/
tiny_weather_cpu.yaml); `--config FILE` names another local_vllm_model config (a GPU one).
Every request generates exactly `--max-tokens` tokens (`ignore_eos`), so both paths do the same
engine work. For each concurrency, rounds alternate the order of the two paths; the table gives
tokens/s per path (median of rounds) and the ratio model/direct. Results: bench/results/
engine_efficiency.json (or --out).

    .venv/bin/python bench/engine_efficiency.py [--concurrency 32 128] [--requests 256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from rich.console import Console
from rich.table import Table

from ng_cli.conversion import to_chat_request
from ng_cli.protocol.responses import ResponsesRequest

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml"
RESULTS = ROOT / "bench" / "results" / "engine_efficiency.json"
NG_RUN = Path(sys.executable).with_name("ng_run")
INSTANCE = "policy_model"
# The example environment's cities (its /verify refuses others).
CITIES = ("Paris", "Tokyo", "Lima", "Oslo", "Cairo", "London", "Sydney", "New York")


def _responses_body(index: int, max_tokens: int) -> dict[str, Any]:
    city = CITIES[index % len(CITIES)]
    return {
        "input": [{"role": "user", "content": f"What is the weather like in {city} today? ({index})"}],
        "max_output_tokens": max_tokens,
        "temperature": 1.0,
    }


ENV_CONFIG = "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml"
AGENT = "example_single_tool_call_simple_agent"


def _write_config(
    directory: Path,
    *,
    base_config: str,
    api_key: str,
    extra: dict[str, Any],
    with_stack: bool,
    agent_workers: int,
) -> Path:
    """A private (0600) config over the chosen one: our key (never argv) and ignore_eos."""
    block = {"api_key": api_key, "extra_body": {"ignore_eos": True}, **extra}
    config: dict[str, Any] = {
        "config_paths": [ENV_CONFIG, base_config] if with_stack else [base_config],
        INSTANCE: {"responses_api_models": {"local_vllm_model": block}},
    }
    if with_stack:
        config[AGENT] = {"responses_api_agents": {"simple_agent": {"num_workers": agent_workers}}}
    path = directory / "bench.yaml"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        yaml.safe_dump(config, handle)
    return path


async def _drive(
    url: str, bodies: list[dict[str, Any]], *, key: str, concurrency: int, usage: str
) -> dict[str, float]:
    """POST every body with `concurrency` callers; generated tokens/s and failures."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    tokens = 0
    failures = 0
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=1800)
    headers = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as session:

        async def worker() -> None:
            nonlocal tokens, failures
            while not queue.empty():
                body = queue.get_nowait()
                async with session.post(url, json=body) as answer:
                    payload = await answer.json(content_type=None)
                    if answer.status != 200:
                        failures += 1
                        continue
                    tokens += int(payload["usage"][usage])

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {"tokens": tokens, "seconds": elapsed, "tokens_per_s": tokens / elapsed, "failures": failures}


def _collect(
    rows: Path, *, head_url: str, concurrency: int, work: Path, env: dict[str, str]
) -> dict[str, float]:
    """One ng_collect_rollouts run over `rows`; tokens/s as the collector measured it."""
    output = work / f"stack-{concurrency}.jsonl"
    command = [
        str(NG_RUN.with_name("ng_collect_rollouts")), f"+agent_name={AGENT}", f"+input_jsonl_fpath={rows}",
        f"+output_jsonl_fpath={output}", f"+num_samples_in_parallel={concurrency}",
        f"+head_server_url={head_url}", "+overwrite=true",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(
            f"ng_collect_rollouts failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    metrics = json.loads(output.with_name(f"{output.stem}_metrics.json").read_text())
    run = metrics["run"]
    tokens = sum(int(agent["output_tokens"]) for agent in metrics["agents"].values())
    return {"tokens": tokens, "seconds": run["elapsed_s"], "tokens_per_s": run["output_tokens_per_s"],
            "failures": int(run["failed"])}  # fmt: skip


def _start_stack(
    config: Path, work: Path, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    ready_file = work / "ready.json"
    log = (work / "ng_run.log").open("wb")
    process = subprocess.Popen(
        [str(NG_RUN), f"+config_paths=[{config}]", "++head_server.port=0", f"+ready_file={ready_file}"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 1800
    while not ready_file.is_file():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            sys.exit(f"ng_run did not get ready; see {work / 'ng_run.log'}")
        time.sleep(0.5)
    return process, json.loads(ready_file.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", default=DEFAULT_CONFIG, help="a local_vllm_model config (path from the repo root)"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--requests", type=int, default=256, help="requests per path per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--waves", type=int, default=0,
                        help="requests per run = waves x concurrency (instead of --requests): a run of one "
                        "wave measures ramp-up and tail, several the steady state")  # fmt: skip
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=YAML",
                        help="extra keys for the instance block, e.g. --set engine_ready_timeout_s=1800")  # fmt: skip
    parser.add_argument("--stack", action="store_true", help="also through the collector and agent")
    parser.add_argument("--agent-workers", type=int, default=1, help="the agent's num_workers (with --stack)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    extra = {key: yaml.safe_load(value) for key, value in (item.split("=", 1) for item in args.set)}

    console = Console()
    key = secrets.token_urlsafe(24)
    work = Path(tempfile.mkdtemp(prefix="ng-bench-engine-"))
    config = _write_config(
        work,
        base_config=args.config,
        api_key=key,
        extra=extra,
        with_stack=args.stack,
        agent_workers=args.agent_workers,
    )
    env = {**os.environ, "NG_ENV_YAML": str(_empty_env(work))}
    process, ready = _start_stack(config, work, env)
    try:
        engine = ready["engines"][0]
        model_url = next(s["url"] for s in ready["servers"] if s["name"] == INSTANCE)
        served = _served_name(config)
        counts = {c: args.waves * c if args.waves else args.requests for c in args.concurrency}
        responses = [_responses_body(i, args.max_tokens) for i in range(max(counts.values()))]
        chats = [
            to_chat_request(ResponsesRequest.model_validate(body), model=served, wants_token_ids=False,
                            extra_body={"ignore_eos": True})
            for body in responses
        ]  # fmt: skip
        paths = {
            "direct": (f"{engine['url']}/chat/completions", chats, "completion_tokens"),
            "model": (f"{model_url}/v1/responses", responses, "output_tokens"),
        }
        rows = {c: work / f"rows-{c}.jsonl" for c in args.concurrency}
        for c, path in rows.items():
            path.write_text("".join(
                json.dumps({"responses_create_params": body, "expected_city": CITIES[i % len(CITIES)]}) + "\n"
                for i, body in enumerate(responses[: counts[c]])
            ))  # fmt: skip
        names = ["direct", "model", *(["stack"] if args.stack else [])]
        asyncio.run(_drive(paths["direct"][0], chats[:16], key=key, concurrency=8, usage="completion_tokens"))
        runs: list[dict[str, Any]] = []
        for round_index in range(args.rounds):
            for concurrency in args.concurrency:
                order = names if round_index % 2 == 0 else names[::-1]
                for route in order:
                    if route == "stack":
                        result = _collect(
                            rows[concurrency],
                            head_url=ready["head_url"],
                            concurrency=concurrency,
                            work=work,
                            env=env,
                        )
                    else:
                        url, bodies, usage = paths[route]
                        result = asyncio.run(
                            _drive(
                                url,
                                bodies[: counts[concurrency]],
                                key=key,
                                concurrency=concurrency,
                                usage=usage,
                            )
                        )
                    runs.append({"round": round_index, "concurrency": concurrency, "path": route, **result})
                    console.print(
                        f"round {round_index} c={concurrency} {route}: {result['tokens_per_s']:.0f} tok/s"
                    )
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    summary = _summarise(runs, args.concurrency, names)
    table = Table(title=f"engine efficiency ({engine['reported']}, {args.max_tokens} tokens/request)")
    columns = ["concurrency", "direct tok/s", "model server tok/s", "model/direct"]
    columns += ["stack tok/s", "stack/direct"] if args.stack else []
    for column in [*columns, "failures"]:
        table.add_column(column, justify="right")
    for row in summary:
        cells = [
            str(row["concurrency"]),
            f"{row['direct']:.0f}",
            f"{row['model']:.0f}",
            f"{row['ratio']:.3f}",
        ]
        if args.stack:
            cells += [f"{row['stack']:.0f}", f"{row['stack_ratio']:.3f}"]
        table.add_row(*cells, str(row["failures"]))
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "config": args.config, "engine": engine, "engine_ready_s": ready["ready_s"].get(engine["name"]),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "max_tokens": args.max_tokens, "requests": counts, "rounds": args.rounds,
        "agent_workers": args.agent_workers if args.stack else None,
        "summary": summary, "runs": runs,
    }, indent=2))  # fmt: skip
    console.print(f"wrote {args.out}")


def _summarise(
    runs: list[dict[str, Any]], concurrencies: list[int], names: list[str]
) -> list[dict[str, Any]]:
    """Per concurrency: median tokens/s per path, and the median of the per-round ratios to direct."""
    rows = []
    for concurrency in concurrencies:
        of = {
            path: [r for r in runs if r["concurrency"] == concurrency and r["path"] == path] for path in names
        }
        row: dict[str, Any] = {"concurrency": concurrency}
        row |= {path: statistics.median(r["tokens_per_s"] for r in of[path]) for path in names}
        for path, key in (("model", "ratio"), ("stack", "stack_ratio")):
            if path in names:
                row[key] = statistics.median(
                    r["tokens_per_s"] / d["tokens_per_s"] for r in of[path] for d in of["direct"] if d["round"] == r["round"]
                )  # fmt: skip
        row["failures"] = sum(int(r["failures"]) for r in runs if r["concurrency"] == concurrency)
        rows.append(row)
    return rows


def _served_name(config: Path) -> str:
    from ng_cli.config.compose import compose_config

    composed = compose_config([f"+config_paths=[{config}]"], cwd=ROOT)
    return str(composed.get(f"{INSTANCE}.responses_api_models.local_vllm_model.model"))


def _empty_env(work: Path) -> Path:
    path = work / "env.yaml"
    path.write_text("{}\n")
    return path


if __name__ == "__main__":
    main()
