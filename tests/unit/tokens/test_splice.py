"""Splicing the previous turn's exact ids (ng_cli/tokens/splice.py) with a real offline BPE tokenizer.

The tiny model's tokenizer is a trained byte-level BPE, so text generated token by token (as a
random-weight model or a guided decoder does) re-encodes to other ids: the drift the splice removes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ng_cli.tokens.chat_template import ChatTokenizer, EndOfTurnNotFoundError
from ng_cli.tokens.splice import HistoryRewrittenError, PromptTexts, SplicedPrompt, build_prompt
from tests.fixtures.tokens.tokenizer_dirs import (
    DROPS_REASONING_TEMPLATE,
    NO_END_OF_TURN_TEMPLATE,
    with_template,
)

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
FIRST = [
    {"role": "system", "content": "You answer weather questions."},
    {"role": "user", "content": "What is the weather in Paris?"},
]


def piecewise(tokenizer: ChatTokenizer, text: str) -> list[int]:
    """`text` generated one character at a time: valid ids, but not the ones encode() picks."""
    return [token for char in text for token in tokenizer.encode(char)]


def assistant_turn(prompt: list[int], generation: list[int], **message: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        **message,
        "prompt_token_ids": prompt,
        "generation_token_ids": generation,
        "generation_log_probs": [-0.5] * len(generation),
    }


def tool_call_turn(
    tokenizer: ChatTokenizer, first: SplicedPrompt, *, ends: bool = True
) -> list[dict[str, Any]]:
    generation = piecewise(tokenizer, CALL_TEXT) + ([tokenizer.end_of_turn_id] if ends else [])
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    return [
        *FIRST,
        assistant_turn(first.token_ids, generation, tool_calls=[call]),
        {"role": "tool", "tool_call_id": "c1", "content": '{"city": "Paris", "temperature": 21}'},
    ]


def rendered_ids(
    tokenizer: ChatTokenizer, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> list[int]:
    """What the normal path sends: the whole conversation re-rendered and re-encoded."""
    clean = [{k: v for k, v in m.items() if not k.startswith(("prompt_", "generation_"))} for m in messages]
    return tokenizer.encode(tokenizer.render(clean, tools=tools))


def test_the_tokenizer_re_encodes_generated_ids_differently(tiny: ChatTokenizer) -> None:
    generated = piecewise(tiny, CALL_TEXT)
    assert tiny.decode(generated) == CALL_TEXT
    assert tiny.encode(tiny.decode(generated)) != generated  # the drift source
    assert len(tiny.encode(CALL_TEXT)) < len(generated)


def test_first_turn_is_the_rendered_conversation(tiny: ChatTokenizer) -> None:
    prompt = build_prompt(tiny, FIRST, tools=TOOLS)
    assert prompt.reused == 0
    assert prompt.token_ids == tiny.encode(tiny.render(FIRST, tools=TOOLS))
    assert tiny.decode(prompt.token_ids).endswith("<|im_start|>assistant\n")


def test_merge_across_a_token_boundary_keeps_the_generated_ids(tiny: ChatTokenizer) -> None:
    first = build_prompt(tiny, FIRST, tools=TOOLS)
    messages = tool_call_turn(tiny, first)
    generation = messages[2]["generation_token_ids"]
    second = build_prompt(tiny, messages, tools=TOOLS)
    history = first.token_ids + generation
    assert second.reused == len(history)
    assert second.token_ids[: len(history)] == history
    # The tail is the template's: the tool result and the generation prompt, encoded as vLLM would.
    full = rendered_ids(tiny, messages, TOOLS)
    tail = second.token_ids[len(history) :]
    assert full[-len(tail) :] == tail
    assert tiny.decode(tail) == (
        '\n<|im_start|>user\n<tool_response>\n{"city": "Paris", "temperature": 21}\n</tool_response>'
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    assert full != second.token_ids  # re-encoding merged the generated pieces: drift on the normal path


def test_generation_stopped_without_an_end_token_gets_the_templates_closing_token(
    tiny: ChatTokenizer,
) -> None:
    first = build_prompt(tiny, FIRST, tools=TOOLS)
    messages = tool_call_turn(tiny, first, ends=False)  # e.g. max_tokens or a stop string
    generation = messages[2]["generation_token_ids"]
    second = build_prompt(tiny, messages, tools=TOOLS)
    history = first.token_ids + generation
    assert second.token_ids[: len(history)] == history
    assert second.token_ids[len(history)] == tiny.end_of_turn_id
    assert tiny.decode(second.token_ids[len(history) + 1 :]).startswith("\n<|im_start|>user\n<tool_response>")


def test_three_turns_stay_contiguous(tiny: ChatTokenizer) -> None:
    first = build_prompt(tiny, FIRST, tools=TOOLS)
    messages = tool_call_turn(tiny, first)
    second = build_prompt(tiny, messages, tools=TOOLS)
    answer = [*piecewise(tiny, "It is sunny in Paris, 21 degrees."), tiny.end_of_turn_id]
    messages = [
        *messages,
        assistant_turn(second.token_ids, answer, content="It is sunny in Paris, 21 degrees."),
        {"role": "user", "content": "And tomorrow?"},
    ]
    third = build_prompt(tiny, messages, tools=TOOLS)
    assert third.token_ids[: len(second.token_ids) + len(answer)] == second.token_ids + answer
    assert (
        tiny.decode(third.token_ids[third.reused :])
        == "\n<|im_start|>user\nAnd tomorrow?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_template_that_drops_earlier_reasoning_is_handled_by_keeping_the_generated_ids(
    tiny_tokenizer_dir: Path, tmp_path: Path
) -> None:
    tokenizer = ChatTokenizer.load(
        with_template(tiny_tokenizer_dir, tmp_path / "drops", DROPS_REASONING_TEMPLATE)
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]
    first = build_prompt(tokenizer, messages)
    reply = "<think>look it up</think>It is sunny."
    generation = [*tokenizer.encode(reply), tokenizer.end_of_turn_id]
    messages += [
        assistant_turn(first.token_ids, generation, content=reply),
        {"role": "user", "content": "Thanks"},
    ]
    second = build_prompt(tokenizer, messages)
    assert second.token_ids[: second.reused] == first.token_ids + generation
    assert "<think>look it up</think>" in tokenizer.decode(second.token_ids)  # kept, as the policy saw it
    assert "look it up" not in tokenizer.decode(rendered_ids(tokenizer, messages))  # the template drops it
    assert tokenizer.decode(second.token_ids[second.reused :]) == (
        "\n<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_template_without_an_end_of_turn_token_is_refused_at_load(
    tiny_tokenizer_dir: Path, tmp_path: Path
) -> None:
    directory = with_template(tiny_tokenizer_dir, tmp_path / "no-eot", NO_END_OF_TURN_TEMPLATE)
    with pytest.raises(EndOfTurnNotFoundError) as caught:
        ChatTokenizer.load(directory)
    assert "does not close an assistant turn with an EOS token" in caught.value.message
    assert "<|im_end|>" in caught.value.message
    assert str(directory) in caught.value.message


def test_a_dropped_turn_is_refused_as_rewritten_history(tiny: ChatTokenizer) -> None:
    first = build_prompt(tiny, FIRST, tools=TOOLS)
    messages = tool_call_turn(tiny, first)
    del messages[1]  # the user question is gone from the history
    with pytest.raises(HistoryRewrittenError, match=r"render with 2 end-of-turn tokens .* hold 3"):
        build_prompt(tiny, messages, tools=TOOLS)


def test_an_edited_earlier_message_is_refused_as_rewritten_history(tiny: ChatTokenizer) -> None:
    first = build_prompt(tiny, FIRST, tools=TOOLS)
    messages = tool_call_turn(tiny, first)
    messages[1] = {"role": "user", "content": "What is the weather in Rome?"}
    with pytest.raises(
        HistoryRewrittenError, match=r"messages\[1\] \(user\) is not in the previous turn's prompt"
    ):
        build_prompt(tiny, messages, tools=TOOLS)


def test_remembered_prompt_texts_give_the_same_prompts_and_refusals(tiny: ChatTokenizer) -> None:
    texts = PromptTexts()
    first = build_prompt(tiny, FIRST, tools=TOOLS, texts=texts)
    assert texts.text_of(first.token_ids, tiny) == tiny.render(FIRST, tools=TOOLS)
    messages = tool_call_turn(tiny, first)
    assert build_prompt(tiny, messages, tools=TOOLS, texts=texts) == build_prompt(tiny, messages, tools=TOOLS)
    messages[1] = {"role": "user", "content": "What is the weather in Rome?"}
    with pytest.raises(HistoryRewrittenError, match=r"messages\[1\]"):
        build_prompt(tiny, messages, tools=TOOLS, texts=texts)


def test_a_spliced_prompt_is_remembered_for_the_turn_after(tiny: ChatTokenizer) -> None:
    texts = PromptTexts()
    first = build_prompt(tiny, FIRST, tools=TOOLS, texts=texts)
    second = build_prompt(tiny, tool_call_turn(tiny, first), tools=TOOLS, texts=texts)
    remembered = texts.text_of(second.token_ids, tiny)
    assert remembered == tiny.decode(second.token_ids)
    texts.remember([1, 2, 3], "sentinel")  # a lookup, not a decoding
    assert texts.text_of([1, 2, 3], tiny) == "sentinel"


def test_remembered_texts_are_bounded() -> None:
    texts = PromptTexts(max_entries=2)
    for n in range(3):
        texts.remember([n], str(n))
    assert len(texts._texts) == 2
    assert list(texts._texts.values()) == ["1", "2"]
