"""Latency vllm_model adds to a call, and the CPU it spends per call.

    upstream   a canned chat-completion server (aiohttp.web, its own process): the "vLLM"
    vllm_model the real server, started by the real child entry point (uvicorn, its own process)
    client     this process: the same call made directly to the upstream, then through vllm_model

For each mode (plain; token ids with a 256-token generation and a 1,024-token prompt) it runs
1,000 sequential calls and then 64 concurrent callers (2,000 calls), each way, and reports p50
and p99 latency, the difference (the added latency), and vllm_model's CPU seconds per call read
from /proc/<pid>/stat. Results: a rich table and bench/results/proxy_overhead.json.

The two "4k history" modes send the same second turn, whose first turn's prompt was 4,096+
tokens (the embedded model's tokenizer and template, models/tiny-weather), carrying that turn's
exact ids: "token ids" forwards it to the chat endpoint as usual; "token exact" (`token_exact:
true`) renders it, splices the previous ids and sends the ids to `/v1/completions`. Their added
p50 latencies, each against a direct call with the body vllm_model sends, show what splicing costs.

    .venv/bin/python bench/proxy_overhead.py [--sequential 1000] [--concurrency 64] [--concurrent-calls 2000]
        [--modes plain,token-ids,token-ids-4k,token-exact-4k]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from rich.console import Console
from rich.table import Table

from ng_cli.servers.session import SESSION_COOKIE
from ng_cli.servers.spec import ServerSpec, write_spec

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "responses_api_models" / "vllm_model" / "app.py"
RESULTS = ROOT / "bench" / "results" / "proxy_overhead.json"
MODEL = "bench-model"
API_KEY = "bench-key"
PROMPT_TOKENS = 1024
GENERATED_TOKENS = 256
HISTORY_TOKENS = 4096
TOKENIZER_DIR = ROOT / "models" / "tiny-weather"
TOOL_CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@dataclass(frozen=True)
class Mode:
    """One way of calling vllm_model: its config switches and whether the input has a 4k history."""

    key: str
    title: str
    with_token_ids: bool
    token_exact: bool = False
    long_history: bool = False


MODES = {
    mode.key: mode
    for mode in (
        Mode("plain", "plain", with_token_ids=False),
        Mode("token-ids", "token ids", with_token_ids=True),
        Mode("token-ids-4k", "token ids, 4k history", with_token_ids=True, long_history=True),
        Mode(
            "token-exact-4k",
            "token exact, 4k history",
            with_token_ids=True,
            token_exact=True,
            long_history=True,
        ),
    )
}
WARMUP_CALLS = 100
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------
# The canned upstream (runs in its own process: `proxy_overhead.py --serve-upstream`)
# ---------------------------------------------------------------------------------------------


def _canned_completion(with_token_ids: bool) -> bytes:
    text = "The weather in Paris is sunny. " * 8
    completion: dict[str, Any] = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "tool_calls": []},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": GENERATED_TOKENS,
            "total_tokens": PROMPT_TOKENS + GENERATED_TOKENS,
        },
    }
    if with_token_ids:
        choice = completion["choices"][0]
        choice["logprobs"] = {
            "content": [
                {"token": f"token_id:{1000 + i}", "logprob": -0.5, "bytes": None, "top_logprobs": []}
                for i in range(GENERATED_TOKENS)
            ]
        }
        choice["token_ids"] = [1000 + i for i in range(GENERATED_TOKENS)]
        completion["prompt_token_ids"] = [5 + i % 30000 for i in range(PROMPT_TOKENS)]
    return orjson.dumps(completion)


def _canned_text_completion() -> bytes:
    """vLLM's `/v1/completions` answer to a token prompt (no prompt echo: the prompt varies)."""
    ids = [1000 + i for i in range(GENERATED_TOKENS)]
    choice = {
        "index": 0,
        "text": "The weather in Paris is sunny. " * 8,
        "finish_reason": "stop",
        "token_ids": ids,
        "logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": [-0.5] * len(ids)},
    }
    usage = {
        "prompt_tokens": HISTORY_TOKENS,
        "completion_tokens": len(ids),
        "total_tokens": HISTORY_TOKENS + len(ids),
    }
    return orjson.dumps(
        {"id": "cmpl-bench", "object": "text_completion", "model": MODEL, "choices": [choice], "usage": usage}
    )


def serve_upstream(sock: socket.socket) -> None:
    from aiohttp import web

    plain, with_ids, text = _canned_completion(False), _canned_completion(True), _canned_text_completion()

    async def chat(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        return web.Response(body=with_ids if body.get("logprobs") else plain, content_type="application/json")

    async def completions(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=text, content_type="application/json")

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def health(request: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    web.run_app(app, sock=sock, print=None, access_log=None)


# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_upstream() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, __file__, "--serve-upstream", str(port)])
    return process, f"http://127.0.0.1:{port}"


def start_model(upstream: str, *, mode: Mode, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    spec = ServerSpec(
        name="policy_model",
        server_type="responses_api_models",
        implementation="vllm_model",
        app_path=str(APP),
        config={
            "base_url": f"{upstream}/v1",
            "api_key": API_KEY,
            "model": MODEL,
            "return_token_id_information": mode.with_token_ids,
            "uses_reasoning_parser": False,
            "token_exact": mode.token_exact,
            "tokenizer_path": str(TOKENIZER_DIR),
        },
        port=port,
        session_secret="bench-secret",
    )
    spec_path = workdir / f"spec-{port}.json"
    write_spec(spec, spec_path)
    log = (workdir / f"vllm_model-{port}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "ng_cli.servers.child", str(spec_path)], stdout=log, stderr=log
    )
    return process, f"http://127.0.0.1:{port}"


async def wait_ready(http: aiohttp.ClientSession, url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url} exited with code {process.returncode}")
        try:
            async with http.get(f"{url}/health") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not become ready")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat (fields 14 and 15, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


# ---------------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------------


@dataclass
class Sample:
    path: str
    mode: str
    pattern: str
    calls: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    calls_per_s: float


class Caller:
    """Sends one kind of call and keeps the session cookie, as an agent does."""

    def __init__(self, http: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str]) -> None:
        self.http, self.url, self.body, self.headers = http, url, body, dict(headers)

    async def call(self) -> float:
        started = time.perf_counter()
        async with self.http.post(self.url, data=self.body, headers=self.headers) as response:
            payload = await response.read()
            if response.status != 200:
                raise RuntimeError(f"{self.url} answered {response.status}: {payload[:300]!r}")
            if SESSION_COOKIE in response.cookies and "Cookie" not in self.headers:
                self.headers["Cookie"] = f"{SESSION_COOKIE}={response.cookies[SESSION_COOKIE].value}"
        return time.perf_counter() - started


async def run_sequential(caller: Caller, calls: int) -> tuple[list[float], float]:
    started = time.perf_counter()
    latencies = [await caller.call() for _ in range(calls)]
    return latencies, time.perf_counter() - started


async def run_concurrent(callers: list[Caller], calls: int) -> tuple[list[float], float]:
    latencies: list[float] = []
    shares = [calls // len(callers) + (1 if i < calls % len(callers) else 0) for i in range(len(callers))]

    async def worker(caller: Caller, share: int) -> None:
        for _ in range(share):
            latencies.append(await caller.call())

    started = time.perf_counter()
    await asyncio.gather(*(worker(caller, share) for caller, share in zip(callers, shares, strict=True)))
    return latencies, time.perf_counter() - started


def summarize(path: str, mode: str, pattern: str, latencies: list[float], wall_s: float) -> Sample:
    ordered = sorted(latencies)
    ms = [value * 1000 for value in ordered]
    return Sample(
        path=path,
        mode=mode,
        pattern=pattern,
        calls=len(ms),
        p50_ms=statistics.median(ms),
        p99_ms=ms[min(len(ms) - 1, int(len(ms) * 0.99))],
        mean_ms=statistics.fmean(ms),
        calls_per_s=len(ms) / wall_s,
    )


def request_bodies(mode: Mode) -> tuple[bytes, str, bytes]:
    """(the Responses body sent to vllm_model, the upstream path and body it turns into, sent directly)."""
    from ng_cli.conversion import to_chat_request
    from ng_cli.protocol.responses import ResponsesRequest

    responses = long_history_request()[1] if mode.long_history else {
        "instructions": "You answer weather questions.",
        "input": [{"role": "user", "content": "What is the weather in Paris today? " * 20}],
        "max_output_tokens": 512,
        "temperature": 1.0,
    }  # fmt: skip
    chat = to_chat_request(
        ResponsesRequest.model_validate(responses),
        model=MODEL,
        wants_token_ids=mode.with_token_ids,
        keeps_token_ids=mode.with_token_ids,
    )
    if not mode.token_exact:
        return orjson.dumps(responses), "/v1/chat/completions", orjson.dumps(chat)
    from ng_cli.tokens.chat_template import ChatTokenizer
    from ng_cli.tokens.splice import build_prompt
    from ng_cli.upstream.token_exact import completion_body

    prompt = build_prompt(ChatTokenizer.load(TOKENIZER_DIR), chat["messages"], tools=chat.get("tools"))
    body = completion_body(chat, prompt.token_ids, keeps_special_tokens=True)
    return orjson.dumps(responses), "/v1/completions", orjson.dumps(body)


def long_history_request() -> tuple[dict[str, Any], dict[str, Any]]:
    """(a first turn whose prompt has HISTORY_TOKENS+ ids, the second turn carrying that turn's exact ids)."""
    from ng_cli.conversion import to_chat_request
    from ng_cli.protocol.responses import ResponsesRequest
    from ng_cli.tokens.chat_template import ChatTokenizer
    from ng_cli.tokens.splice import build_prompt

    tokenizer = ChatTokenizer.load(TOKENIZER_DIR)
    sentence = "What is the weather in Paris today? "
    repeats = HISTORY_TOKENS // len(tokenizer.encode(sentence)) + 1
    tool = {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    first = {
        "instructions": "You answer weather questions.",
        "input": [{"role": "user", "content": sentence * repeats}],
        "tools": [tool],
    }
    chat = to_chat_request(ResponsesRequest.model_validate(first), model=MODEL, wants_token_ids=False)
    prompt = build_prompt(tokenizer, chat["messages"], tools=chat["tools"]).token_ids
    generation = [*tokenizer.encode(TOOL_CALL_TEXT), tokenizer.end_of_turn_id]
    call = {
        "type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}',
        "prompt_token_ids": prompt, "generation_token_ids": generation, "generation_log_probs": [-0.5] * len(generation),
    }  # fmt: skip
    result = '{"city": "Paris", "condition": "sunny", "temperature": 21, "unit": "celsius"}'
    output = {"type": "function_call_output", "call_id": "call_1", "output": result}
    second = {**first, "input": [*first["input"], call, output], "max_output_tokens": 512, "temperature": 1.0}
    return first, second


async def measure_mode(
    http: aiohttp.ClientSession,
    upstream: str,
    *,
    spec: Mode,
    args: argparse.Namespace,
    workdir: Path,
) -> tuple[list[Sample], dict[str, float]]:
    mode = spec.title
    process, model_url = start_model(upstream, mode=spec, workdir=workdir)
    try:
        await wait_ready(http, model_url, process)
        responses_body, direct_path, direct_body = request_bodies(spec)
        headers = {"Content-Type": "application/json"}
        direct = (f"{upstream}{direct_path}", direct_body, {**headers, "Authorization": f"Bearer {API_KEY}"})
        proxied = (f"{model_url}/v1/responses", responses_body, headers)
        samples: list[Sample] = []
        cpu_per_call: dict[str, float] = {}
        if spec.long_history:  # the rollout's first turn, through the same server as in a real rollout
            await Caller(http, proxied[0], orjson.dumps(long_history_request()[0]), headers).call()
        for path, (url, body, hdrs) in (("direct", direct), ("vllm_model", proxied)):
            warm = Caller(http, url, body, hdrs)
            await run_sequential(warm, WARMUP_CALLS)
            before = cpu_seconds(process.pid)
            latencies, wall = await run_sequential(Caller(http, url, body, hdrs), args.sequential)
            if path == "vllm_model":
                cpu_per_call["sequential"] = (cpu_seconds(process.pid) - before) / args.sequential
            samples.append(summarize(path, mode, "sequential", latencies, wall))
            callers = [Caller(http, url, body, hdrs) for _ in range(args.concurrency)]
            before = cpu_seconds(process.pid)
            latencies, wall = await run_concurrent(callers, args.concurrent_calls)
            if path == "vllm_model":
                cpu_per_call[f"concurrent_{args.concurrency}"] = (cpu_seconds(process.pid) - before) / len(
                    latencies
                )
            samples.append(summarize(path, mode, f"{args.concurrency} concurrent", latencies, wall))
        return samples, cpu_per_call
    finally:
        process.terminate()
        process.wait(timeout=10)


def added(samples: list[Sample], mode: str, pattern: str) -> dict[str, float]:
    by_path = {s.path: s for s in samples if s.mode == mode and s.pattern == pattern}
    direct, proxied = by_path["direct"], by_path["vllm_model"]
    return {"p50_ms": proxied.p50_ms - direct.p50_ms, "p99_ms": proxied.p99_ms - direct.p99_ms}


def render(samples: list[Sample], cpu: dict[str, dict[str, float]], console: Console) -> None:
    table = Table(title="vllm_model proxy overhead (canned upstream on loopback)")
    for column in (
        "mode",
        "pattern",
        "path",
        "calls",
        "p50 ms",
        "p99 ms",
        "calls/s",
        "added p50 ms",
        "added p99 ms",
        "CPU ms/call",
    ):
        table.add_column(column, justify="right" if column not in ("mode", "pattern", "path") else "left")
    for sample in samples:
        extra = ["", "", ""]
        if sample.path == "vllm_model":
            delta = added(samples, sample.mode, sample.pattern)
            key = (
                "sequential" if sample.pattern == "sequential" else f"concurrent_{sample.pattern.split()[0]}"
            )
            extra = [
                f"{delta['p50_ms']:.3f}",
                f"{delta['p99_ms']:.3f}",
                f"{cpu[sample.mode][key] * 1000:.3f}",
            ]
        table.add_row(
            sample.mode, sample.pattern, sample.path, str(sample.calls),
            f"{sample.p50_ms:.3f}", f"{sample.p99_ms:.3f}", f"{sample.calls_per_s:.0f}", *extra,
        )  # fmt: skip
    console.print(table)


async def main_async(args: argparse.Namespace) -> None:
    upstream_process, upstream = start_upstream()
    samples: list[Sample] = []
    cpu: dict[str, dict[str, float]] = {}
    connector = aiohttp.TCPConnector(limit=0)
    try:
        async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar()) as http:
            await wait_ready(http, upstream, upstream_process)
            with tempfile.TemporaryDirectory(prefix="ng-bench-") as workdir:
                for key in args.modes.split(","):
                    spec = MODES[key]
                    mode_samples, mode_cpu = await measure_mode(
                        http, upstream, spec=spec, args=args, workdir=Path(workdir)
                    )
                    samples += mode_samples
                    cpu[spec.title] = mode_cpu
    finally:
        upstream_process.terminate()
        upstream_process.wait(timeout=10)
    render(samples, cpu, Console(width=150))
    write_results(samples, cpu, args)


def write_results(samples: list[Sample], cpu: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    patterns = ("sequential", f"{args.concurrency} concurrent")
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "settings": {
            **vars(args),
            "prompt_tokens": PROMPT_TOKENS,
            "generated_tokens": GENERATED_TOKENS,
            "history_tokens": HISTORY_TOKENS,
        },
        "samples": [asdict(sample) for sample in samples],
        "added_latency_ms": {mode: {p: added(samples, mode, p) for p in patterns} for mode in cpu},
        "vllm_model_cpu_ms_per_call": {
            mode: {k: v * 1000 for k, v in values.items()} for mode, values in cpu.items()
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    Console().print(f"wrote {RESULTS.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=1000, help="sequential calls per path")
    parser.add_argument("--concurrency", type=int, default=64, help="concurrent callers")
    parser.add_argument("--concurrent-calls", type=int, default=2000, help="calls in the concurrent run")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = [key for key in args.modes.split(",") if key not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {unknown}; choose from {', '.join(MODES)}")
    if args.serve_upstream:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", args.serve_upstream))
        serve_upstream(sock)
        return
    del args.serve_upstream
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
