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

`--stream` measures streaming instead: the upstream streams `--tokens` chunks, one every
`--token-interval-ms` (as vLLM paces tokens), and each client reads vLLM's chat stream directly
or vllm_model's `/v1/responses` stream (the converted one). For 1 and `--concurrency` streams
at once it reports time to first token and the gap between tokens, p50/p99, each way, and what
the proxy adds (bench/results/proxy_overhead_stream.json).

    .venv/bin/python bench/proxy_overhead.py [--sequential 1000] [--concurrency 64] [--concurrent-calls 2000]
        [--modes plain,token-ids,token-ids-4k,token-exact-4k]
    .venv/bin/python bench/proxy_overhead.py --stream [--concurrency 64] [--stream-rounds 3]

One file past 600 lines on purpose: the modes share the canned upstream, the processes and
the table/JSON conventions, and a user runs one script to see what the proxy costs.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import signal
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


def _stream_chunks(tokens: int) -> list[bytes]:
    """A chat stream as vLLM sends it: role chunk, one chunk per token, finish, usage, [DONE]."""
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": MODEL}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + orjson.dumps({**base, "choices": [choice]}) + b"\n\n"

    usage = {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": tokens,
        "total_tokens": PROMPT_TOKENS + tokens,
    }
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": f" w{i}"}) for i in range(tokens)),
        chunk({}, "stop"),
        b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n",
        b"data: [DONE]\n\n",
    ]


def serve_upstream(sock: socket.socket, *, tokens: int = 64, interval_s: float = 0.005) -> None:
    from aiohttp import web

    plain, with_ids, text = _canned_completion(False), _canned_completion(True), _canned_text_completion()
    chunks = _stream_chunks(tokens)

    async def chat(request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        if body.get("stream"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for n, piece in enumerate(chunks):
                if 1 <= n <= tokens:
                    await asyncio.sleep(interval_s)  # vLLM's pace: one token per decoding step
                await response.write(piece)
            await response.write_eof()
            return response
        return web.Response(body=with_ids if body.get("logprobs") else plain, content_type="application/json")

    async def completions(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=text, content_type="application/json")

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def health(_request: web.Request) -> web.Response:
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


def start_upstream(*stream_args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, __file__, "--serve-upstream", str(port), *stream_args])
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
    from ng_cli.model_server.token_exact import completion_body
    from ng_cli.tokens.chat_template import ChatTokenizer
    from ng_cli.tokens.splice import build_prompt

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


def _machine() -> dict[str, Any]:
    """Where a result was measured (every results file names it)."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def write_results(samples: list[Sample], cpu: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    patterns = ("sequential", f"{args.concurrency} concurrent")
    result = {
        "machine": _machine(),
        "settings": {
            **{key: value for key, value in vars(args).items() if key != "out"},
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
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    Console().print(f"wrote {args.out}")


# ---------------------------------------------------------------------------------------------
# Streaming (--stream): time to first token and the gap between tokens
# ---------------------------------------------------------------------------------------------

STREAM_RESULTS = ROOT / "bench" / "results" / "proxy_overhead_stream.json"
_DIRECT_TOKEN = b'"content":" w'
"""A token chunk of the upstream's chat stream (its content is " w<n>")."""
_PROXIED_TOKEN = b'data: {"type":"response.output_text.delta"'
"""A token event of vllm_model's Responses stream."""


@dataclass
class StreamSample:
    path: str
    streams: int
    calls: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    gap_p50_ms: float
    gap_p99_ms: float


async def stream_once(
    http: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], marker: bytes, tokens: int
) -> tuple[float, list[float]]:
    """(time to the first token, the gaps between tokens) of one streamed call, in seconds."""
    started = time.perf_counter()
    times: list[float] = []
    async with http.post(url, data=body, headers=headers) as response:
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}: {(await response.read())[:300]!r}")
        async for line in response.content:
            if marker in line:
                times.append(time.perf_counter())
    if len(times) != tokens:
        raise RuntimeError(f"{url} streamed {len(times)} tokens, expected {tokens}")
    return times[0] - started, [later - earlier for earlier, later in itertools.pairwise(times)]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


async def stream_run(
    http: aiohttp.ClientSession,
    path: str,
    target: tuple[str, bytes, dict[str, str], bytes],
    *,
    streams: int,
    args: argparse.Namespace,
) -> StreamSample:
    url, body, headers, marker = target
    ttfts: list[float] = []
    gaps: list[float] = []

    rounds = args.single_stream_calls if streams == 1 else args.stream_rounds

    async def caller() -> None:
        for _ in range(rounds):
            ttft, between = await stream_once(http, url, body, headers, marker, args.tokens)
            ttfts.append(ttft)
            gaps.extend(between)

    await asyncio.gather(*(caller() for _ in range(streams)))
    return StreamSample(
        path=path,
        streams=streams,
        calls=len(ttfts),
        ttft_p50_ms=_percentile(ttfts, 0.5),
        ttft_p99_ms=_percentile(ttfts, 0.99),
        gap_p50_ms=_percentile(gaps, 0.5),
        gap_p99_ms=_percentile(gaps, 0.99),
    )


async def measure_streaming(args: argparse.Namespace) -> None:
    """Direct vs through vllm_model, at 1 and `--concurrency` streams; table and JSON."""
    upstream_process, upstream = start_upstream(
        "--tokens", str(args.tokens), "--token-interval-ms", str(args.token_interval_ms)
    )
    samples: list[StreamSample] = []
    connector = aiohttp.TCPConnector(limit=0)
    try:
        async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar()) as http:
            await wait_ready(http, upstream, upstream_process)
            with tempfile.TemporaryDirectory(prefix="ng-bench-") as workdir:
                process, model_url = start_model(upstream, mode=MODES["plain"], workdir=Path(workdir))
                try:
                    await wait_ready(http, model_url, process)
                    responses_body, _, chat_body = request_bodies(MODES["plain"])
                    json_headers = {"Content-Type": "application/json"}
                    direct_body = orjson.dumps({**orjson.loads(chat_body), "stream": True})
                    proxied_body = orjson.dumps({**orjson.loads(responses_body), "stream": True})
                    targets = {
                        "direct": (f"{upstream}/v1/chat/completions", direct_body,
                                   {**json_headers, "Authorization": f"Bearer {API_KEY}"}, _DIRECT_TOKEN),
                        "vllm_model": (f"{model_url}/v1/responses", proxied_body, json_headers, _PROXIED_TOKEN),
                    }  # fmt: skip
                    for target in targets.values():  # warm-up
                        await stream_once(http, *target, args.tokens)
                    for streams in (1, args.concurrency):
                        for path, target in targets.items():
                            samples.append(await stream_run(http, path, target, streams=streams, args=args))
                finally:
                    process.terminate()
                    process.wait(timeout=10)
    finally:
        upstream_process.terminate()
        upstream_process.wait(timeout=10)
    render_streaming(samples, Console(width=150))
    write_stream_results(samples, args)


def _stream_added(samples: list[StreamSample], streams: int) -> dict[str, float]:
    by_path = {s.path: s for s in samples if s.streams == streams}
    direct, proxied = asdict(by_path["direct"]), asdict(by_path["vllm_model"])
    keys = ("ttft_p50_ms", "ttft_p99_ms", "gap_p50_ms", "gap_p99_ms")
    return {key: proxied[key] - direct[key] for key in keys}


def render_streaming(samples: list[StreamSample], console: Console) -> None:
    table = Table(title="streaming through vllm_model (/v1/responses) vs vLLM's chat stream directly")
    for column in ("streams", "path", "calls", "TTFT p50 ms", "TTFT p99 ms", "gap p50 ms", "gap p99 ms"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for sample in samples:
        table.add_row(
            str(sample.streams), sample.path, str(sample.calls), f"{sample.ttft_p50_ms:.2f}",
            f"{sample.ttft_p99_ms:.2f}", f"{sample.gap_p50_ms:.2f}", f"{sample.gap_p99_ms:.2f}",
        )  # fmt: skip
    for streams in sorted({s.streams for s in samples}):
        delta = _stream_added(samples, streams)
        table.add_row(
            str(streams), "[bold]added[/bold]", "", *(f"{delta[key]:+.2f}" for key in delta),
        )  # fmt: skip
    console.print(table)


def write_stream_results(samples: list[StreamSample], args: argparse.Namespace) -> None:
    result = {
        "machine": _machine(),
        "settings": {
            "tokens": args.tokens,
            "token_interval_ms": args.token_interval_ms,
            "stream_rounds": args.stream_rounds,
            "single_stream_calls": args.single_stream_calls,
            "concurrency": args.concurrency,
        },
        "samples": [asdict(sample) for sample in samples],
        "added_ms": {
            str(streams): _stream_added(samples, streams) for streams in sorted({s.streams for s in samples})
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    Console().print(f"wrote {args.out}")


# ---------------------------------------------------------------------------------------------
# The RL shape (--rl): token ids + logprobs on every call, many calls at once, at GPU rates
# ---------------------------------------------------------------------------------------------

RL_RESULTS = ROOT / "bench" / "results" / "proxy_overhead_rl.json"
STAND_IN = Path(__file__).with_name("_vllm_stand_in.py")
RL_INPUT = "What is the weather in Paris today? " * 12


@dataclass
class RlRun:
    round: int
    concurrency: int
    stream: bool
    path: str
    tokens: int
    seconds: float
    tokens_per_s: float
    failures: int
    cpu_s_per_1k_tokens: float | None
    """The path's model server process's CPU seconds (utime + stime) per 1,000 generated tokens."""


def start_rl_model(
    upstream: str, *, workdir: Path, label: str, src: Path | None, profile: Path | None
) -> tuple[subprocess.Popen[bytes], str]:
    """vllm_model in the training configuration (token ids + logprobs), from this tree or `src`."""
    port = _free_port()
    app = (src or ROOT) / "responses_api_models" / "vllm_model" / "app.py"
    spec = ServerSpec(
        name="policy_model",
        server_type="responses_api_models",
        implementation="vllm_model",
        app_path=str(app),
        config={
            "base_url": f"{upstream}/v1",
            "api_key": API_KEY,
            "model": MODEL,
            "return_token_id_information": True,
            "uses_reasoning_parser": False,
        },
        port=port,
        session_secret="bench-secret",
    )
    spec_path = workdir / f"spec-{label}.json"
    write_spec(spec, spec_path)
    env = dict(os.environ)
    if src is not None:  # ahead of the editable install's finder, which comes last on sys.meta_path
        env["PYTHONPATH"] = str(src)
    command = [sys.executable]
    if profile is not None:
        command += ["-m", "cProfile", "-o", str(profile)]
    command += ["-m", "ng_cli.servers.child", str(spec_path)]
    log = (workdir / f"vllm_model-{label}.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=log, env=env, cwd=src or ROOT)
    return process, f"http://127.0.0.1:{port}"


async def rl_drive(
    http: aiohttp.ClientSession,
    target: tuple[str, bytes, dict[str, str]],
    *,
    concurrency: int,
    calls: int,
    stream: bool,
    is_chat: bool,
    tokens_per_call: int,
) -> tuple[int, float, int]:
    """(generated tokens, seconds, failures) of `calls` calls made by `concurrency` callers."""
    url, body, headers = target
    left = calls
    tokens = failures = 0
    errors: dict[str, int] = {}
    # 128 tokens of max_output_tokens 128 end with finish_reason "length": response.incomplete
    finals = (b"data: [DONE]",) if is_chat else (b"event: response.completed", b"event: response.incomplete")

    async def one() -> int:
        async with http.post(url, data=body, headers=headers) as response:
            if response.status != 200:
                text = (await response.read())[:300].decode(errors="replace")
                key = f"{response.status} {text}"
                errors[key] = errors.get(key, 0) + 1
                return -1
            if not stream:
                usage = orjson.loads(await response.read())["usage"]
                return int(usage["completion_tokens" if is_chat else "output_tokens"])
            done = False
            async for line in response.content:
                done = done or line.startswith(finals)
            return tokens_per_call if done else -1

    async def caller() -> None:
        nonlocal left, tokens, failures
        while left > 0:
            left -= 1
            got = await one()
            if got < 0:
                failures += 1
            else:
                tokens += got

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    for error, count in sorted(errors.items(), key=lambda kv: -kv[1])[:3]:
        Console().print(f"  {count} x {error}", markup=False)
    return tokens, time.perf_counter() - started, failures


def start_stand_in(args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], str]:
    """The stand-in vLLM (bench/_vllm_stand_in.py) in its own process, and its URL."""
    port = _free_port()
    command = [sys.executable, str(STAND_IN), str(port), "--tokens", str(args.tokens)]
    command += ["--tokens-per-s", str(args.tokens_per_s), "--prompt-tokens", str(args.prompt_tokens)]
    return subprocess.Popen(command), f"http://127.0.0.1:{port}"


async def measure_rl(args: argparse.Namespace) -> None:
    """Direct vs through vllm_model (this tree, and `--baseline-src` if given), interleaved rounds."""
    upstream_process, upstream = start_stand_in(args)
    sources: dict[str, Path | None] = {"vllm_model": None}
    if args.baseline_src:
        sources["vllm_model@base"] = args.baseline_src
    runs: list[RlRun] = []
    models: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=600)
    try:
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, cookie_jar=aiohttp.DummyCookieJar()
        ) as http:
            await wait_ready(http, upstream, upstream_process)
            with tempfile.TemporaryDirectory(prefix="ng-bench-") as workdir:
                try:
                    for label, src in sources.items():
                        profile = args.profile / f"{label}.prof" if args.profile and src is None else None
                        models[label] = start_rl_model(
                            upstream,
                            workdir=Path(workdir),
                            label=label.replace("@", "-"),
                            src=src,
                            profile=profile,
                        )
                    for process, url in models.values():
                        await wait_ready(http, url, process)
                    runs = await _rl_rounds(http, upstream, models, args)
                finally:
                    for process, _ in models.values():
                        # SIGINT: uvicorn re-raises the signal it stopped on, and only a
                        # KeyboardInterrupt (not SIGTERM's default action) lets cProfile write
                        process.send_signal(signal.SIGINT)
                    for process, _ in models.values():
                        process.wait(timeout=60)
    finally:
        upstream_process.terminate()
        upstream_process.wait(timeout=10)
    summary = rl_summary(runs)
    render_rl(summary, args, Console(width=160))
    result = {
        "machine": _machine(),
        "load_average": os.getloadavg(),
        "settings": {
            key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()
        },
        "summary": summary,
        "runs": [asdict(run) for run in runs],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    Console().print(f"wrote {args.out}")
    if args.profile:
        _print_profile(args.profile / "vllm_model.prof")


async def _rl_rounds(
    http: aiohttp.ClientSession,
    upstream: str,
    models: dict[str, tuple[subprocess.Popen[bytes], str]],
    args: argparse.Namespace,
) -> list[RlRun]:
    responses = {"input": RL_INPUT, "max_output_tokens": args.tokens, "temperature": 1.0}
    chat = {
        "model": MODEL, "messages": [{"role": "user", "content": RL_INPUT}], "max_tokens": args.tokens,
        "temperature": 1.0, "logprobs": True, "top_logprobs": 0, "return_token_ids": True,
        "return_tokens_as_token_ids": True,
    }  # fmt: skip
    json_headers = {"Content-Type": "application/json"}
    runs: list[RlRun] = []
    for stream in args.rl_streams:
        direct = (f"{upstream}/v1/chat/completions", orjson.dumps({**chat, "stream": stream} if stream else chat),
                  {**json_headers, "Authorization": f"Bearer {API_KEY}"})  # fmt: skip
        body = orjson.dumps({**responses, "stream": True} if stream else responses)
        targets = {"direct": (direct, None)} | {
            label: ((f"{url}/v1/responses", body, json_headers), process)
            for label, (process, url) in models.items()
        }
        for (target, _process), label in zip(targets.values(), targets, strict=True):  # warm-up
            await rl_drive(
                http,
                target,
                concurrency=16,
                calls=32,
                stream=stream,
                is_chat=label == "direct",
                tokens_per_call=args.tokens,
            )
        for concurrency in args.rl_concurrency:
            for round_ in range(args.rounds):
                order = list(targets)
                order = order[round_ % len(order) :] + order[: round_ % len(order)]
                for label in order:
                    target, process = targets[label]
                    before = cpu_seconds(process.pid) if process else 0.0
                    tokens, seconds, failures = await rl_drive(
                        http, target, concurrency=concurrency, calls=args.waves * concurrency,
                        stream=stream, is_chat=label == "direct", tokens_per_call=args.tokens,
                    )  # fmt: skip
                    cpu = (cpu_seconds(process.pid) - before) / tokens * 1000 if process and tokens else None
                    run = RlRun(
                        round_, concurrency, stream, label, tokens, seconds, tokens / seconds, failures, cpu
                    )
                    runs.append(run)
                    Console().print(
                        f"round {round_} c={concurrency} {'stream' if stream else 'whole'} {label}: "
                        f"{run.tokens_per_s:.0f} tok/s, failures {failures}"
                        + (f", {cpu * 1000:.1f} CPU ms/1k tokens" if cpu is not None else "")
                    )
    return runs


def rl_summary(runs: list[RlRun]) -> list[dict[str, Any]]:
    """Per (stream, concurrency, path): median tokens/s, median ratio to direct (same round), CPU."""
    rows = []
    keys = sorted({(r.stream, r.concurrency) for r in runs})
    for stream, concurrency in keys:
        of = [r for r in runs if r.stream == stream and r.concurrency == concurrency]
        direct = {r.round: r for r in of if r.path == "direct"}
        for path in dict.fromkeys(r.path for r in of):
            mine = [r for r in of if r.path == path]
            cpu = [r.cpu_s_per_1k_tokens for r in mine if r.cpu_s_per_1k_tokens is not None]
            rows.append({
                "stream": stream, "concurrency": concurrency, "path": path,
                "tokens_per_s": statistics.median(r.tokens_per_s for r in mine),
                "ratio": statistics.median(r.tokens_per_s / direct[r.round].tokens_per_s for r in mine),
                "cpu_s_per_1k_tokens": statistics.median(cpu) if cpu else None,
                "failures": sum(r.failures for r in mine),
            })  # fmt: skip
    return rows


def render_rl(summary: list[dict[str, Any]], args: argparse.Namespace, console: Console) -> None:
    table = Table(
        title=f"RL shape: {args.tokens} tokens a call, token ids + logprobs, stand-in at "
        f"{args.tokens_per_s:.0f} tok/s (median of {args.rounds} interleaved rounds)"
    )
    for column in ("answer", "in flight", "path", "tokens/s", "/direct", "CPU ms / 1k tokens", "failures"):
        table.add_column(column, justify="left" if column in ("answer", "path") else "right")
    for row in summary:
        cpu = row["cpu_s_per_1k_tokens"]
        table.add_row(
            "stream" if row["stream"] else "whole", str(row["concurrency"]), row["path"],
            f"{row['tokens_per_s']:.0f}", f"{row['ratio']:.3f}", "-" if cpu is None else f"{cpu * 1000:.1f}",
            str(row["failures"]),
        )  # fmt: skip
    console.print(table)


def _print_profile(path: Path, top: int = 35) -> None:
    """The model server's hottest functions (cProfile: its own overhead inflates small calls)."""
    import pstats

    if not path.is_file():
        Console().print(f"no profile at {path} (the server did not exit cleanly)")
        return
    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def _booleans(text: str) -> list[bool]:
    return [part.strip().lower() in ("1", "true", "yes", "stream") for part in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=1000, help="sequential calls per path")
    parser.add_argument(
        "--concurrency", type=int, default=64, help="concurrent callers (streams with --stream)"
    )
    parser.add_argument("--concurrent-calls", type=int, default=2000, help="calls in the concurrent run")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--stream", action="store_true", help="measure streaming: TTFT and inter-token gap")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per streamed answer (--stream)")
    parser.add_argument("--token-interval-ms", type=float, default=5.0, help="upstream's pace (--stream)")
    parser.add_argument(
        "--stream-rounds", type=int, default=3, help="streams per concurrent caller (--stream)"
    )
    parser.add_argument(
        "--single-stream-calls", type=int, default=60, help="calls of the 1-stream run (--stream)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        help=f"the results file (default: {RESULTS.name}, {STREAM_RESULTS.name} with --stream)",
    )
    parser.add_argument("--rl", action="store_true", help="the RL shape: token ids + logprobs at GPU rates")
    parser.add_argument(
        "--rl-concurrency", type=int, nargs="+", default=[256, 1024], help="calls in flight (--rl)"
    )
    parser.add_argument(
        "--rl-streams", type=_booleans, default=[False, True], help="false,true: whole, streamed (--rl)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (--rl)")
    parser.add_argument("--waves", type=int, default=2, help="calls per caller in a run (--rl)")
    parser.add_argument(
        "--tokens-per-s", type=float, default=20_000, help="the stand-in's full-batch rate (--rl)"
    )
    parser.add_argument(
        "--prompt-tokens", type=int, default=512, help="prompt ids sent back on each call (--rl)"
    )
    parser.add_argument("--baseline-src", type=Path, help="a second vllm_model from this source tree (--rl)")
    parser.add_argument("--profile", type=Path, help="a folder: cProfile this tree's vllm_model there (--rl)")
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rl and "--tokens" not in sys.argv:
        args.tokens = 128
    args.out = args.out or (RL_RESULTS if args.rl else STREAM_RESULTS if args.stream else RESULTS)
    unknown = [key for key in args.modes.split(",") if key not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {unknown}; choose from {', '.join(MODES)}")
    if args.serve_upstream:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", args.serve_upstream))
        serve_upstream(sock, tokens=args.tokens, interval_s=args.token_interval_ms / 1000)
        return
    del args.serve_upstream
    if args.rl:
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
        asyncio.run(measure_rl(args))
        return
    if args.stream:
        asyncio.run(measure_streaming(args))
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
