"""Rollout rows shaped as ng_collect_rollouts writes them, for the report's unit tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson


def rollout_row(
    task: int,
    repeat: int,
    reward: float,
    *,
    agent: str = "agent",
    city: str = "Paris",
    status: str = "completed",
    tokens: bool = True,
    **fields: Any,
) -> dict[str, Any]:
    """A weather-task rollout: reasoning + tool call, the tool's output, the answer."""
    call = {
        "type": "function_call",
        "call_id": f"c{task}{repeat}",
        "name": "get_weather",
        "arguments": json.dumps({"city": city}),
    }
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": f"{city}: sunny"}],
    }
    if tokens:
        call |= {
            "prompt_token_ids": [1] * 30,
            "generation_token_ids": [2] * 7,
            "generation_log_probs": [-0.1] * 7,
        }
        answer |= {
            "prompt_token_ids": [1] * 50,
            "generation_token_ids": [2] * 4,
            "generation_log_probs": [-0.1] * 4,
        }
    response: dict[str, Any] = {
        "status": status,
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "look it up"}]},
            call,
            {
                "type": "function_call_output",
                "call_id": f"c{task}{repeat}",
                "output": json.dumps({"city": city, "t": 24}),
            },
            answer,
        ],
        "usage": {"output_tokens": 11},
    }
    if status == "incomplete":
        response["incomplete_details"] = {"reason": "context_length_exceeded"}
    return {
        "responses_create_params": {
            "input": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": f"Weather in {city}?"},
            ]
        },
        "agent_ref": {"type": "responses_api_agents", "name": agent},
        "response": response,
        "reward": reward,
        **fields,
        "_ng_task_index": task,
        "_ng_rollout_index": repeat,
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]], *, tail: bytes = b"") -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows) + tail)
    return path
