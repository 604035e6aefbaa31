"""The judge mode of bench/nemo_gym_servers.py (`--judge engine`): a real model as every second model.

Shared code of that script, not a script. Instead of the stub judge's fixed text, every judge, user
simulator and reward model a server names is one `local_vllm_model` instance that `ng_run` itself
plans and starts on the CPU with the embedded tiny model (models/tiny-weather, the quick start's
`tiny_weather_cpu.yaml`): one engine per server, shared by all its judge roles. Its answers are
nonsense for a judge, which is the point: the verdict a server computes is whatever its own parsing
makes of a real engine's text, never a fixed one.

Between the server and that model server sits a tap (`JudgeTap`): it forwards every request and
records what came back, so the harness can tell a reward that followed real judge answers from one
a server gave without asking, or after its judge call failed (some servers swallow that into a
reward of 0), or after the model server's empty answer for a prompt longer than the context. The
one change it makes to a request: an output-token cap above `JUDGE_MAX_TOKENS` is lowered to it
(judges ask for 8192 and more; the tiny model's whole context is 4096 tokens, and vLLM refuses a
cap that does not fit it), and the call is marked `capped`.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request, Response

__all__ = ["JUDGE_CONFIG", "JudgeCall", "JudgeTap", "judge_stack"]

JUDGE_CONFIG = "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml"
"""The quick start's CPU engine config (our repo's): its instance is `policy_model`."""
JUDGE_INSTANCE = "policy_model"
JUDGE_OVERRIDES = (
    # The model's own limit (max_position_embeddings): judge prompts carry the whole answer, and
    # its byte-level vocabulary of 1031 makes a token of every 1-3 characters.
    f"++{JUDGE_INSTANCE}.responses_api_models.local_vllm_model.vllm_serve_kwargs.max_model_len=4096",
)
JUDGE_MAX_TOKENS = 512
"""The output-token cap a judge call gets at most (see above): room for the prompt in 4096."""
TOKEN_CAPS = ("max_output_tokens", "max_tokens", "max_completion_tokens")
"""Where `/v1/responses` and `/v1/chat/completions` requests put their output-token cap."""
FORWARD_TIMEOUT_S = 300.0
"""A cap for one judge call (a CPU engine on busy cores), not a measurement."""


@contextlib.contextmanager
def judge_stack(work: Path) -> Iterator[str]:
    """`ng_run` serving the tiny model with its own CPU engine; yields its model server's URL.
    Raises SystemExit (with ng_run's log tail) when it does not become ready."""
    from _ng_run import running_stack

    with running_stack(work, [JUDGE_CONFIG], JUDGE_OVERRIDES) as stack:
        servers = {entry["name"]: entry for entry in stack.ready["servers"]}
        yield str(servers[JUDGE_INSTANCE]["url"])


@dataclass(frozen=True)
class JudgeCall:
    """One request a server made to its judge, and the engine's answer."""

    path: str
    status: int
    text: str
    """The answer's text (a response's output text, a chat completion's message), or the error body."""
    capped: bool = False
    """Its output-token cap was lowered to JUDGE_MAX_TOKENS."""

    @property
    def answered(self) -> bool:
        """The engine generated an answer: 200, and not the model server's empty answer for a
        prompt longer than the context (`ng_cli.conversion.overflow`)."""
        return self.status == 200 and not self.text.startswith(OVERFLOW_MARK)


OVERFLOW_MARK = "(context_length_exceeded) "
"""How `answer_text` marks an overflow answer's text."""


def capped_request(body: bytes) -> tuple[bytes, bool]:
    """The request with every output-token cap above JUDGE_MAX_TOKENS lowered to it; whether any was."""
    try:
        found = json.loads(body)
    except ValueError:
        return body, False
    if not isinstance(found, dict):
        return body, False
    high = [key for key in TOKEN_CAPS if isinstance(found.get(key), int) and found[key] > JUDGE_MAX_TOKENS]
    if not high:
        return body, False
    return json.dumps({**found, **dict.fromkeys(high, JUDGE_MAX_TOKENS)}).encode(), True


def answer_text(path: str, status: int, body: bytes) -> str:
    """What the judge said, from a `/v1/responses` or `/v1/chat/completions` answer."""
    try:
        found = json.loads(body)
    except ValueError:
        return body.decode(errors="replace")
    if status != 200 or not isinstance(found, dict):
        return json.dumps(found)
    incomplete = found.get("incomplete_details") or {}
    overflow = isinstance(incomplete, dict) and incomplete.get("reason") == "context_length_exceeded"
    prefix = OVERFLOW_MARK if overflow else ""
    if path.endswith("/chat/completions"):
        choices = found.get("choices") or [{}]
        return prefix + str((choices[0].get("message") or {}).get("content") or "")
    return prefix + "".join(
        part.get("text", "")
        for item in found.get("output") or []
        if isinstance(item, dict)
        for part in item.get("content") or []
        if isinstance(part, dict)
    )


class JudgeTap:
    """A loopback server that forwards every request to `target` (output-token caps at most
    JUDGE_MAX_TOKENS) and records each call
    (read from the harness's thread while the tap's own serves: appends only, under a lock)."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self._calls: list[JudgeCall] = []
        self._lock = threading.Lock()

    def mark(self) -> int:
        with self._lock:
            return len(self._calls)

    def since(self, mark: int) -> list[JudgeCall]:
        with self._lock:
            return list(self._calls[mark:])

    def build_app(self) -> Any:
        import httpx2 as httpx

        from ng_cli.servers.app import build_app

        app = build_app("judge_tap")

        @app.api_route("/{path:path}", methods=["GET", "POST"])
        async def forward(path: str, request: Request) -> Response:
            body, capped = capped_request(await request.body())
            headers = {"content-type": request.headers.get("content-type", "application/json")}
            try:
                async with httpx.AsyncClient(timeout=FORWARD_TIMEOUT_S) as client:
                    answer = await client.request(
                        request.method, f"{self.target}/{path}", content=body, headers=headers
                    )
                status, content = answer.status_code, answer.content
                kind = answer.headers.get("content-type", "application/json")
            except httpx.HTTPError as error:
                status, kind = 502, "application/json"
                content = json.dumps({"error": {"message": f"judge unreachable: {error!r}"}}).encode()
            if request.method == "POST":
                call = JudgeCall(f"/{path}", status, answer_text(path, status, content), capped)
                with self._lock:
                    self._calls.append(call)
            return Response(content=content, status_code=status, media_type=kind)

        return app
