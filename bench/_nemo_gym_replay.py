"""What stands in for the models when bench/nemo_gym_servers.py runs NeMo Gym's servers: the policy
replays the model turns NeMo Gym recorded, and a stub judge answers every second model.

Shared code of that script, not a script (bench/_*.py are skipped by the smoke test's
every-script check).

The replay: NeMo Gym's `data/example_rollouts.jsonl` holds, for a prompt, the whole trajectory
its agent recorded (`response.output`). A model turn is a run of the model's own items (messages,
function calls, reasoning); it ends where the agent added something: tool outputs (simple_agent),
or an observation as a user message (gymnasium_agent). The policy answers a request with the
recorded turn whose index is the number of turns in the request less those of the row's own
input (a row's input may hold a conversation of its own: its tool outputs are not turns here;
speed_bench_agent puts its replies between the row's user messages), and with an empty message
when the recording has no such turn. speed_bench_agent records one call per user turn with
nothing between them: there a turn ends after its message (`message_ends_turn`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import Response

__all__ = [
    "STUB_JUDGE_TEXT",
    "ReplayPolicy",
    "anthropic_replay_app",
    "first_user_text",
    "model_turns",
    "stub_judge_app",
]

STUB_JUDGE_TEXT = (
    "Judgement: yes. [[A=B]] The answer is correct. GRADE: A. Verdict: CORRECT. "
    "<points>2</points> \\boxed{1} Final score: 1"
)


def first_user_text(items: Any) -> str:
    """The text of a request's first user message: the key that finds a row's recording."""
    if isinstance(items, str):
        return items
    for item in items or []:
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))
    return ""


def _is_model_item(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    if kind in ("function_call", "reasoning"):
        return True
    return kind in (None, "message") and item.get("role", "assistant") == "assistant"


def _ends_turn(item: Any) -> bool:
    """An item the agent adds after a model turn: a tool's output or an observation."""
    return isinstance(item, dict) and (
        item.get("type") == "function_call_output" or (item.get("role") == "user")
    )


def model_turns(items: Any) -> int:
    """How many model turns `items` holds: runs of model items each followed by what ends a turn."""
    turns, in_turn = 0, False
    for item in items if isinstance(items, list) else []:
        if _is_model_item(item):
            in_turn = True
        elif in_turn and _ends_turn(item):
            turns, in_turn = turns + 1, False
    return turns


def recorded_turns(folder: Path, *, message_ends_turn: bool = False) -> dict[str, list[list[dict[str, Any]]]]:
    """First user text -> the model's turns NeMo Gym recorded for that prompt (its first rollout);
    with `message_ends_turn`, a message closes its turn too."""
    path = folder / "data" / "example_rollouts.jsonl"
    turns: dict[str, list[list[dict[str, Any]]]] = {}
    if not path.exists():
        return turns
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        segments: list[list[dict[str, Any]]] = [[]]
        for item in (row.get("response") or {}).get("output") or []:
            if _is_model_item(item):
                segments[-1].append(item)
                if message_ends_turn and item.get("type", "message") == "message":
                    segments.append([])
            elif _ends_turn(item) and segments[-1]:
                segments.append([])
        key = first_user_text((row.get("responses_create_params") or {}).get("input"))
        turns.setdefault(key, [s for s in segments if s])
    return turns


class ReplayPolicy:
    """The scripted model's answer to each request of the rows' rollouts (see the module's note)."""

    def __init__(
        self,
        folder: Path,
        rows: list[dict[str, Any]],
        empty: Callable[[], list[dict[str, Any]]],
        *,
        message_ends_turn: bool = False,
    ) -> None:
        self.turns = recorded_turns(folder, message_ends_turn=message_ends_turn)
        self.empty = empty
        self.row_turns: dict[str, int] = {}
        """First user text -> how many model turns the row's own input holds (its own conversation)."""
        for row in rows:
            items = (row.get("responses_create_params") or {}).get("input")
            self.row_turns.setdefault(first_user_text(items), model_turns(items))

    def __call__(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        items = body.get("input")
        key = first_user_text(items)
        turns = self.turns.get(key)
        turn = model_turns(items) - self.row_turns.get(key, 0)
        if turns and turn < len(turns):
            return turns[turn]
        return self.empty()


def stub_judge_app() -> Any:
    """A model server on loopback answering `/v1/responses` and `/v1/chat/completions` with one
    fixed text that carries the common verdict forms."""
    from ng_cli.servers.app import JSONResponse, build_app, read_json_object
    from ng_cli.servers.testing import assistant_message

    app = build_app("stub_judge")

    @app.post("/v1/responses")
    async def responses(request: Request) -> JSONResponse:
        body = await read_json_object(request)
        output = [assistant_message(STUB_JUDGE_TEXT)]
        return JSONResponse(
            {
                "id": "resp_judge",
                "object": "response",
                "created_at": 0,
                "model": body.get("model") or "judge",
                "status": "completed",
                "output": output,
                "tools": [],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
            }
        )

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        await read_json_object(request)
        return JSONResponse(
            {
                "id": "chat_judge",
                "object": "chat.completion",
                "created": 0,
                "model": "judge",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": STUB_JUDGE_TEXT},
                    }
                ],
            }
        )

    return app


def _anthropic_blocks(turn: list[dict[str, Any]], tools: list[str]) -> list[dict[str, Any]]:
    """A recorded turn as Anthropic content blocks; a tool named as the request's tools name it
    (Claude Code's MCP tools are `mcp__<server>__<tool>`, NeMo Gym records `<tool>`)."""
    blocks: list[dict[str, Any]] = []
    for item in turn:
        if item.get("type") == "function_call":
            name = str(item.get("name"))
            named = next((tool for tool in tools if tool == name or tool.endswith(f"__{name}")), name)
            arguments = json.loads(item.get("arguments") or "{}")
            blocks.append(
                {
                    "type": "tool_use",
                    "id": item.get("call_id") or "toolu_0",
                    "name": named,
                    "input": arguments,
                }
            )
        elif item.get("type", "message") == "message":
            content = item.get("content")
            parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or []]
            blocks.append({"type": "text", "text": "".join(parts)})
    return blocks or [{"type": "text", "text": ""}]


def _sse(model: str, blocks: list[dict[str, Any]]) -> str:
    """Anthropic's streamed Message: its start, each block (started, one delta, stopped), its end."""
    stop = "tool_use" if any(block["type"] == "tool_use" for block in blocks) else "end_turn"
    usage = {"input_tokens": 1, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": {
        "id": "msg_replay", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": usage}})]  # fmt: skip
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        events += [
            ("content_block_start", {"index": index, "content_block": start}),
            ("content_block_delta", {"index": index, "delta": delta}),
            ("content_block_stop", {"index": index}),
        ]
    events += [
        (
            "message_delta",
            {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 1}},
        ),
        ("message_stop", {}),
    ]
    return "".join(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n" for kind, data in events)


def anthropic_replay_app(turns: dict[str, list[list[dict[str, Any]]]]) -> Any:
    """Anthropic's Messages API on loopback (what Claude Code speaks: claude_code_agent's CLI,
    pointed here by ANTHROPIC_BASE_URL) answering with the turns NeMo Gym recorded: the prompt is
    found in the first user message, the turn is the number of assistant messages before it."""
    from ng_cli.servers.app import JSONResponse, build_app, read_json_object

    app = build_app("anthropic_replay")

    @app.head("/api/hello")
    async def hello() -> Response:
        return Response(status_code=200)

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        body = await read_json_object(request)
        said = body.get("messages") or []
        first = next((m for m in said if isinstance(m, dict) and m.get("role") == "user"), {})
        text = first_user_text([first])
        recorded = next((found for key, found in turns.items() if key and key in text), [])
        turn = sum(1 for m in said if isinstance(m, dict) and m.get("role") == "assistant")
        tools = [str(tool.get("name")) for tool in body.get("tools") or [] if isinstance(tool, dict)]
        blocks = _anthropic_blocks(recorded[turn] if turn < len(recorded) else [], tools)
        model = str(body.get("model") or "replay")
        if body.get("stream"):
            return Response(_sse(model, blocks), media_type="text/event-stream")
        stop = "tool_use" if any(block["type"] == "tool_use" for block in blocks) else "end_turn"
        return JSONResponse({"id": "msg_replay", "type": "message", "role": "assistant", "model": model,
                             "content": blocks, "stop_reason": stop, "stop_sequence": None,
                             "usage": {"input_tokens": 1, "output_tokens": 1}})  # fmt: skip

    return app
