"""Generated tokens/s of an engine driven directly vs through the model server, same prompts, interleaved.

    direct   a raw aiohttp client -> the engine's /v1/chat/completions, with the exact chat body
             the model server sends (built by the model server's own `VllmChat.responses_chat`
             over the composed config: with `return_token_id_information: true` it asks for
             token ids and logprobs exactly as the stack does; `--set KEY=YAML` reaches both)
    model    the same client -> local_vllm_model's /v1/responses -> the same engine
    stack    (--stack) ng_collect_rollouts -> simple_agent -> local_vllm_model -> the same engine,
             the same prompts as rows of the example environment (tokens/s as the collector
             measures it: its own output tokens over its elapsed time)

ng_run starts the stack from config (the engine through local_vllm_model, the product's path):
by default the CPU engine of models/tiny-weather (responses_api_models/local_vllm_model/configs/
tiny_weather_cpu.yaml); `--config FILE` names another local_vllm_model config (a GPU one).
Every request generates exactly `--max-tokens` tokens (`ignore_eos`), so both paths do the same
engine work. `--rows FILE` takes the prompts (and tools) from an environment's rows instead, e.g.
NeMo Gym's example rows, whose function tools carry `"strict": true`: the model server strips it
(as NeMo Gym does), and the path `direct_strict` sends the same bodies with it kept (what the
stack sent before the strip), so `direct_strict/direct` is the strip's gain on this engine.
`--paths` picks the paths (default: direct, model, and stack with `--stack`). For each concurrency, rounds alternate the order of the two paths; the table gives
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
import resource
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

from ng_cli.model_server.vllm import VllmChat, parse_request

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


def _cpu_seconds(group: int) -> dict[str, float]:
    """CPU seconds (user + system) of every live process in ng_run's process group, by command
    line: around a run, where the stack's time goes (a server pinned at one core is the limit)."""
    tick = os.sysconf("SC_CLK_TCK")
    seconds: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != group:
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        name = f"{entry.name} {command.strip()[-90:]}"
        seconds[name] = (int(fields[11]) + int(fields[12])) / tick
    return seconds


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the collector runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cores_used(before: dict[str, float], after: dict[str, float], elapsed: float) -> dict[str, float]:
    """Cores each process used over `elapsed` (the busiest first; idle ones left out)."""
    used = {name: (after[name] - before.get(name, 0.0)) / elapsed for name in after}
    return {
        name: round(value, 2) for name, value in sorted(used.items(), key=lambda kv: -kv[1]) if value >= 0.05
    }


def _rows_bodies(path: Path, count: int, max_tokens: int) -> list[dict[str, Any]]:
    """`count` Responses bodies cycled from an environment's rows (their prompts and tools as they are)."""
    rows = [json.loads(line) for line in path.read_text().split("\n") if line.strip()]
    if not rows:
        sys.exit(f"{path}: no rows")
    bodies = []
    for index in range(count):
        params = dict(rows[index % len(rows)]["responses_create_params"])
        bodies.append({**params, "max_output_tokens": max_tokens, "temperature": 1.0})
    return bodies


def _with_strict(chat: dict[str, Any], responses: dict[str, Any]) -> dict[str, Any]:
    """The chat body with each function tool's `strict` put back as the row had it (the control)."""
    strict = {tool.get("name"): tool["strict"] for tool in responses.get("tools") or [] if "strict" in tool}
    tools = [
        {**tool, "function": {**tool["function"], "strict": strict[tool["function"]["name"]]}}
        if tool.get("type") == "function" and tool["function"].get("name") in strict
        else tool
        for tool in chat.get("tools") or []
    ]
    return {**chat, "tools": tools} if tools else chat


def _model_server_chat(config: Path) -> VllmChat:
    """The model server's request builder over the composed config: `responses_chat` is the body
    it sends the engine (token-id switches, extra_body, sampling overrides, tool fields)."""
    from ng_cli.config.compose import compose_config
    from ng_cli.engines.config import LocalVllmModelConfig

    composed = compose_config([f"+config_paths=[{config}]"], cwd=ROOT)
    block = dict(composed.get(f"{INSTANCE}.responses_api_models.local_vllm_model"))
    block["base_url"] = "http://engine.invalid/v1"  # as ng_run hands it the engines; never called
    # The builder reads only the config; the client and metrics are never touched by responses_chat.
    return VllmChat(LocalVllmModelConfig.model_validate(block), client=None, metrics=None)  # type: ignore[arg-type]


PATHS = ("direct", "direct_strict", "model", "stack")
TOOLS = "tools_"
"""Prefix of the paths over `--tool-rows` (their ratios are to tools_direct)."""

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
    output = work / f"stack-{rows.stem}.jsonl"
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
    parser.add_argument(
        "--rows", type=Path, help="prompts and tools from these rows (e.g. an environment's example.jsonl)"
    )
    parser.add_argument("--tool-rows", type=Path,
                        help="a second workload from these rows (tools with their strict flags): paths tools_*")  # fmt: skip
    parser.add_argument(
        "--tools-at", type=int, nargs="+", help="the tools_* paths only at these concurrencies"
    )
    parser.add_argument("--paths", nargs="+", choices=[p + n for p in ("", TOOLS) for n in PATHS],
                        help="the paths to drive (default: direct model [stack])")  # fmt: skip
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
        builder = _model_server_chat(config)
        counts = {c: args.waves * c if args.waves else args.requests for c in args.concurrency}
        total = max(counts.values())
        workloads = {
            "": _rows_bodies(args.rows, total, args.max_tokens)
            if args.rows
            else [_responses_body(i, args.max_tokens) for i in range(total)]
        }
        if args.tool_rows:
            workloads[TOOLS] = _rows_bodies(args.tool_rows, total, args.max_tokens)
        paths: dict[str, tuple[str, list[dict[str, Any]], str]] = {}
        rows: dict[tuple[str, int], Path] = {}
        for prefix, responses in workloads.items():
            chats = [builder.responses_chat(parse_request(body)) for body in responses]
            strict = [_with_strict(chat, body) for chat, body in zip(chats, responses, strict=True)]
            paths[f"{prefix}direct"] = (f"{engine['url']}/chat/completions", chats, "completion_tokens")
            paths[f"{prefix}direct_strict"] = (
                f"{engine['url']}/chat/completions",
                strict,
                "completion_tokens",
            )
            paths[f"{prefix}model"] = (f"{model_url}/v1/responses", responses, "output_tokens")
            for c in args.concurrency:
                rows[prefix, c] = work / f"rows-{prefix}{c}.jsonl"
                rows[prefix, c].write_text("".join(
                    json.dumps({"responses_create_params": body, "expected_city": _city(body, i)}) + "\n"
                    for i, body in enumerate(responses[: counts[c]])
                ))  # fmt: skip
        names = args.paths or ["direct", "model", *(["stack"] if args.stack else [])]
        if "direct" not in names:
            names = ["direct", *names]
        for prefix in workloads:
            if any(n.startswith(prefix) for n in names) and f"{prefix}direct" not in names:
                names = [f"{prefix}direct", *names]  # every ratio is to its workload's direct
        if any(n.endswith("stack") for n in names) and not args.stack:
            sys.exit("--paths stack needs --stack (the stack's agent and environment)")
        if any(n.startswith(TOOLS) for n in names) and not args.tool_rows:
            sys.exit("--paths tools_* needs --tool-rows")
        chats = paths["direct"][1]
        asyncio.run(_drive(paths["direct"][0], chats[:16], key=key, concurrency=8, usage="completion_tokens"))
        runs: list[dict[str, Any]] = []
        for round_index in range(args.rounds):
            for concurrency in args.concurrency:
                here = [
                    n
                    for n in names
                    if not n.startswith(TOOLS) or concurrency in (args.tools_at or [concurrency])
                ]
                order = here if round_index % 2 == 0 else here[::-1]
                for path in order:
                    cpu_before, children_before = _cpu_seconds(process.pid), _children_cpu()
                    if path.endswith("stack"):
                        result = _collect(
                            rows[path.removesuffix("stack"), concurrency],
                            head_url=ready["head_url"],
                            concurrency=concurrency,
                            work=work,
                            env=env,
                        )
                    else:
                        url, bodies, usage = paths[path]
                        result = asyncio.run(
                            _drive(
                                url,
                                bodies[: counts[concurrency]],
                                key=key,
                                concurrency=concurrency,
                                usage=usage,
                            )
                        )
                    cores = _cores_used(cpu_before, _cpu_seconds(process.pid), result["seconds"])
                    if path.endswith("stack"):
                        cores["ng_collect_rollouts"] = round(
                            (_children_cpu() - children_before) / result["seconds"], 2
                        )
                    runs.append(
                        {
                            "round": round_index,
                            "concurrency": concurrency,
                            "path": path,
                            **result,
                            "cores": cores,
                        }
                    )
                    console.print(
                        f"round {round_index} c={concurrency} {path}: {result['tokens_per_s']:.0f} tok/s"
                    )
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    summary = _summarise(runs, args.concurrency, names)
    others = [name for name in names if name != "direct"]  # tools_direct: its ratio to direct
    table = Table(title=f"engine efficiency ({engine['reported']}, {args.max_tokens} tokens/request)")
    columns = ["concurrency", "direct tok/s"]
    for name in others:
        columns += [f"{name} tok/s", f"{name}/{_base(name) if name != _base(name) else 'direct'}"]
    for column in [*columns, "failures"]:
        table.add_column(column, justify="right")
    for row in summary:
        cells = [str(row["concurrency"]), f"{row['direct']:.0f}"]
        for name in others:
            if name not in row:
                cells += ["-", "-"]
                continue
            ratio = row.get(_RATIO_KEYS.get(name, name + "_ratio"), row[name] / row["direct"])
            cells += [f"{row[name]:.0f}", f"{ratio:.3f}"]
        table.add_row(*cells, str(row["failures"]))
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "config": args.config, "engine": engine, "engine_ready_s": ready["ready_s"].get(engine["name"]),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "max_tokens": args.max_tokens, "requests": counts, "rounds": args.rounds,
        "agent_workers": args.agent_workers if args.stack else None, "paths": names,
        "rows": str(args.rows) if args.rows else None, "set": extra,
        "tool_rows": str(args.tool_rows) if args.tool_rows else None,
        "direct_body_example": chats[0],
        "summary": summary, "runs": runs,
    }, indent=2))  # fmt: skip
    log = work / "ng_run.log"
    if log.is_file():  # the engine's own lines (throughput, preemption), beside the record
        args.out.with_suffix(".ng_run.log").write_text(log.read_text(errors="replace")[-4_000_000:])
    console.print(f"wrote {args.out}")


_RATIO_KEYS = {"model": "ratio"}
"""The JSON key of path/direct (earlier records named model/direct `ratio`, stack/direct `stack_ratio`)."""


def _base(path: str) -> str:
    """The direct path a path is compared with (its workload's)."""
    return f"{TOOLS}direct" if path.startswith(TOOLS) else "direct"


def _city(body: dict[str, Any], index: int) -> str:
    """The city a row asks about (the example environment's /verify knows only CITIES)."""
    text = json.dumps(body.get("input"))
    return next((city for city in CITIES if city in text), CITIES[index % len(CITIES)])


def _summarise(
    runs: list[dict[str, Any]], concurrencies: list[int], names: list[str]
) -> list[dict[str, Any]]:
    """Per concurrency: median tokens/s per path, and the median of the per-round ratios to direct."""
    rows = []
    for concurrency in concurrencies:
        of = {
            path: [r for r in runs if r["concurrency"] == concurrency and r["path"] == path] for path in names
        }
        of = {
            path: found for path, found in of.items() if found
        }  # tools_* may run at some concurrencies only
        row: dict[str, Any] = {"concurrency": concurrency}
        row |= {path: statistics.median(r["tokens_per_s"] for r in of[path]) for path in of}
        for path in of:
            base = _base(path)
            if path != base:
                row[_RATIO_KEYS.get(path, f"{path}_ratio")] = statistics.median(
                    r["tokens_per_s"] / d["tokens_per_s"] for r in of[path] for d in of[base] if d["round"] == r["round"]
                )  # fmt: skip
        row["failures"] = sum(int(r["failures"]) for r in runs if r["concurrency"] == concurrency)
        rows.append(row)
    return rows


def _empty_env(work: Path) -> Path:
    path = work / "env.yaml"
    path.write_text("{}\n")
    return path


if __name__ == "__main__":
    main()
