"""Continuing the input's final assistant message instead of starting a new turn (vLLM's
`continue_final_message`), as NeMo Gym 0.7.0's `continue_final_assistant_message` asks for.

RULER-style benchmarks seed the answer's first words as a last assistant message; the model must
write on from them, not answer again. vLLM does that when the chat body says
`continue_final_message: true, add_generation_prompt: false`. Its reasoning parser then reads the
continuation's text as reasoning (the template opened no new turn for it to close), so NeMo Gym
puts that text back in front of the content, unwrapped; `merge_continued_reasoning` does the same.
"""

from __future__ import annotations

from typing import Any

__all__ = ["continue_final_message", "merge_continued_reasoning"]


def continue_final_message(chat: dict[str, Any]) -> dict[str, Any]:
    """The chat body asking vLLM to continue its last message, when that one is the assistant's."""
    messages = chat.get("messages")
    if not messages or not isinstance(messages[-1], dict) or messages[-1].get("role") != "assistant":
        return chat
    return {**chat, "continue_final_message": True, "add_generation_prompt": False}


def merge_continued_reasoning(completion: dict[str, Any], chat: dict[str, Any]) -> dict[str, Any]:
    """vLLM's answer to a continued message with what its reasoning parser took back in the
    content (NeMo Gym: `reasoning_content + content`); any other answer unchanged."""
    if not chat.get("continue_final_message"):
        return completion
    choices = completion.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return completion
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return completion
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if not reasoning:
        return completion
    merged = {key: value for key, value in message.items() if key not in ("reasoning", "reasoning_content")}
    merged["content"] = reasoning + (message.get("content") or "")
    return {**completion, "choices": [{**choices[0], "message": merged}]}
