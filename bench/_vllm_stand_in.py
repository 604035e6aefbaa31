"""A stand-in vLLM that answers at GPU rates with the RL payload: token ids and logprobs on every call.

It decodes the way a GPU batch does: every request in flight gains one token per step, and a step
takes `max(min_step_s, running / tokens_per_s)`, so a full batch runs at `tokens_per_s` generated
tokens/s whatever the concurrency, and a call finishes when it has `tokens` tokens. What it sends
is what vLLM 0.2x sends with `logprobs: true, top_logprobs: 0, return_token_ids: true,
return_tokens_as_token_ids: true`: per token a `{"token": "token_id:<n>", "logprob", "bytes",
"top_logprobs": []}` entry (`bytes` are the UTF-8 bytes of that "token_id:<n>" string), the
generated `token_ids`, and the prompt's `prompt_token_ids`; streamed, one chunk per token with its
logprob entry and `token_ids: [n]`, the prompt ids on the first chunk, then finish, usage, `[DONE]`.

Bodies are made once at start (every call gets the same bytes), so the stand-in spends its CPU on
HTTP, not on making JSON: what a proxy in front of it costs is what shows.

    python bench/_vllm_stand_in.py PORT [--tokens 128] [--tokens-per-s 20000] [--prompt-tokens 512]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket

import orjson
from aiohttp import web

MODEL = "bench-model"


def _entry(token_id: int, logprob: float) -> dict[str, object]:
    token = f"token_id:{token_id}"
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}


class Payload:
    """The canned answers: a whole chat completion and the chunks of the same answer streamed."""

    def __init__(self, *, tokens: int, prompt_tokens: int, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.tokens = tokens
        ids = [rng.randrange(100, 128_000) for _ in range(tokens)]
        logprobs = [-rng.random() * rng.choice((0.001, 0.1, 3.0)) for _ in range(tokens)]
        prompt = [rng.randrange(100, 128_000) for _ in range(prompt_tokens)]
        text = "".join(f" w{i}" for i in range(tokens))
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": tokens,
            "total_tokens": prompt_tokens + tokens,
        }
        self.whole = orjson.dumps(
            {
                "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": MODEL,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None, "annotations": None,
                                "audio": None, "function_call": None, "tool_calls": [], "reasoning": None},
                    "logprobs": {"content": [_entry(i, lp) for i, lp in zip(ids, logprobs, strict=True)]},
                    "finish_reason": "length", "stop_reason": None, "token_ids": ids,
                }],
                "service_tier": None, "system_fingerprint": None, "usage": usage, "prompt_logprobs": None,
                "prompt_token_ids": prompt, "kv_transfer_params": None,
            }
        )  # fmt: skip
        base = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 0, "model": MODEL}

        def chunk(choice: dict[str, object], **top: object) -> bytes:
            return b"data: " + orjson.dumps({**base, **top, "choices": [choice]}) + b"\n\n"

        first = {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
        self.first = chunk(first, prompt_token_ids=prompt)
        self.steps = [
            chunk({"index": 0, "delta": {"content": f" w{n}"},
                   "logprobs": {"content": [_entry(i, lp)]}, "finish_reason": None, "token_ids": [i]})
            for n, (i, lp) in enumerate(zip(ids, logprobs, strict=True))
        ]  # fmt: skip
        last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length", "stop_reason": None}
        self.closing = [
            chunk(last),
            b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n",
            b"data: [DONE]\n\n",
        ]


class Engine:
    """The batch: each step, every running request gains a token; a step's length follows the batch."""

    def __init__(self, *, tokens_per_s: float, min_step_s: float) -> None:
        self.tokens_per_s = tokens_per_s
        self.min_step_s = min_step_s
        self.running: list[asyncio.Queue[int]] = []
        self._wake = asyncio.Event()

    def admit(self) -> asyncio.Queue[int]:
        """A new request: its queue gets the step count each time the request gains a token."""
        queue: asyncio.Queue[int] = asyncio.Queue()
        self.running.append(queue)
        self._wake.set()
        return queue

    def leave(self, queue: asyncio.Queue[int]) -> None:
        if queue in self.running:
            self.running.remove(queue)

    async def run(self) -> None:
        while True:
            if not self.running:
                self._wake.clear()
                await self._wake.wait()
            step_s = max(self.min_step_s, len(self.running) / self.tokens_per_s)
            await asyncio.sleep(step_s)  # a late wake-up (a loaded loop) is not made up for
            for queue in list(self.running):
                queue.put_nowait(1)


def build_app(payload: Payload, engine: Engine) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        queue = engine.admit()
        try:
            if not body.get("stream"):
                for _ in range(payload.tokens):
                    await queue.get()
                return web.Response(body=payload.whole, content_type="application/json")
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            await response.write(payload.first)
            for piece in payload.steps:
                await queue.get()
                await response.write(piece)
            for piece in payload.closing:
                await response.write(piece)
            await response.write_eof()
            return response
        finally:
            engine.leave(queue)

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def health(_request: web.Request) -> web.Response:
        return web.Response()

    async def start_engine(app: web.Application) -> None:
        app["engine"] = asyncio.get_running_loop().create_task(engine.run())

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.on_startup.append(start_engine)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--tokens", type=int, default=128, help="generated tokens per call")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument(
        "--tokens-per-s", type=float, default=20_000, help="the batch's decode rate when full"
    )
    parser.add_argument("--min-step-ms", type=float, default=10.0, help="a step's floor (a small batch)")
    args = parser.parse_args()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    payload = Payload(tokens=args.tokens, prompt_tokens=args.prompt_tokens)
    engine = Engine(tokens_per_s=args.tokens_per_s, min_step_s=args.min_step_ms / 1000)
    web.run_app(build_app(payload, engine), sock=sock, print=None, access_log=None, backlog=4096)


if __name__ == "__main__":
    main()
