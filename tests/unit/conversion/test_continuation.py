"""`continue_final_assistant_message` (NeMo Gym 0.7.0's vllm_model): the chat body asks vLLM to
continue a final assistant message, and the reasoning its parser split off is the continuation."""

from __future__ import annotations

from typing import Any

from ng_cli.conversion.continuation import continue_final_message, merge_continued_reasoning

USER = {"role": "user", "content": "Complete: the capital of France is"}
SEED = {"role": "assistant", "content": "The capital of France is"}


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}]}


def test_only_a_final_assistant_message_is_continued() -> None:
    chat = {"model": "m", "messages": [USER, SEED]}
    assert continue_final_message(chat) == {
        **chat,
        "continue_final_message": True,
        "add_generation_prompt": False,
    }
    assert continue_final_message({"model": "m", "messages": [SEED, USER]}) == {
        "model": "m",
        "messages": [SEED, USER],
    }
    assert continue_final_message({"model": "m", "messages": []}) == {"model": "m", "messages": []}


def test_the_parsed_reasoning_of_a_continuation_goes_back_in_front_of_the_content() -> None:
    continued = {"messages": [USER, SEED], "continue_final_message": True}
    merged = merge_continued_reasoning(_completion({"content": " Paris", "reasoning": " It is"}), continued)
    assert merged["choices"][0]["message"] == {"role": "assistant", "content": " It is Paris"}
    only = merge_continued_reasoning(
        _completion({"content": None, "reasoning_content": " Paris."}), continued
    )
    assert only["choices"][0]["message"]["content"] == " Paris."
    fresh = _completion({"content": "x", "reasoning": "thought"})
    assert merge_continued_reasoning(fresh, {"messages": [USER]}) is fresh
