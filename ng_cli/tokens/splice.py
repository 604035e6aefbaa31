"""Splice the previous turn's exact ids in place of the re-rendered history (token-exact prompts).

Re-rendering a conversation and encoding it again need not give back the ids the model generated
(`_Ski`+`nny` comes back as `_Skinny`; a tool call comes back with the template's whitespace), so a
trainer would learn from tokens the policy never produced. Instead, for the last assistant
message that carries token ids (the previous model call's `prompt_token_ids` and
`generation_token_ids`):

    prompt = previous prompt ids + previous generation ids (+ the end-of-turn id, when the
             generation stopped without one) + encode(the rendered text after that turn's end)

The end of that turn is found by counting end-of-turn tokens, never by position: the previous
ids hold N of them (N + 1 with the closing one the template adds to a generation that stopped
early), so the spliced history ends where the rendered text's N-th end-of-turn token ends. The
end-of-turn token is an added token, which the tokenizer splits out before any merge: counting
its text counts its ids, and the text after it encodes alone exactly as it does inside the whole.

Refusals (`SpliceError`, HTTP 400), because splicing would silently drop a change:
- the history up to that assistant turn renders with a different number of end-of-turn tokens
  than the ids hold (turns removed, inserted or merged): `HistoryRewrittenError`;
- a system, user or tool message before it is not in the previous prompt's text (edited):
  `HistoryRewrittenError`;
- the rendered conversation has fewer end-of-turn tokens than needed: `EndOfTurnMissingError`.
A template that changes earlier turns by itself (Qwen3 drops the reasoning of turns before the
last user message) is not refused: the previous ids are kept as generated, reasoning included,
which is what the policy saw (docs/conversion.md, "Token-exact prompts").
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ng_cli.errors import BadRequestError
from ng_cli.tokens.chat_template import ChatTokenizer
from ng_cli.tokens.contract import TOKEN_FIELDS, token_info_of

__all__ = [
    "EndOfTurnMissingError",
    "HistoryRewrittenError",
    "PromptTexts",
    "SpliceError",
    "SplicedPrompt",
    "build_prompt",
]


class SpliceError(BadRequestError):
    """The previous turn's ids cannot stand in for the re-rendered history."""


class HistoryRewrittenError(SpliceError):
    """The conversation before the last assistant turn is not the one the previous ids were made from."""


class EndOfTurnMissingError(SpliceError):
    """The rendered conversation lacks the end-of-turn token that closes the last assistant turn."""


@dataclass(frozen=True, slots=True)
class SplicedPrompt:
    """The prompt ids to send, and how many of them were reused unchanged from the previous turn."""

    token_ids: list[int]
    reused: int
    """Ids copied from the previous turn (0: nothing to splice, the whole prompt was rendered)."""


class PromptTexts:
    """The text of recent prompts built here, by their ids, so the next turn's check of its previous
    prompt need not decode it (decoding 4k ids costs about 1 ms; the lookup, microseconds)."""

    def __init__(self, max_entries: int = 256) -> None:
        self.max_entries = max_entries
        self._texts: OrderedDict[bytes, str] = OrderedDict()

    def remember(self, ids: list[int], text: str) -> None:
        key = _key(ids)
        self._texts[key] = text
        self._texts.move_to_end(key)
        while len(self._texts) > self.max_entries:
            self._texts.popitem(last=False)

    def text_of(self, ids: list[int], tokenizer: ChatTokenizer) -> str:
        """The remembered text of `ids`, else their decoding."""
        return self._texts.get(_key(ids)) or tokenizer.decode(ids)


def _key(ids: list[int]) -> bytes:
    return array("Q", ids).tobytes()


def build_prompt(
    tokenizer: ChatTokenizer,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
    texts: PromptTexts | None = None,
) -> SplicedPrompt:
    """The prompt ids for `messages` (chat messages; an assistant message may carry token ids)."""
    if texts is None:
        texts = PromptTexts(max_entries=0)
    last = _last_with_ids(messages)
    clean = [_without_token_fields(message) for message in messages]
    rendered = tokenizer.render(clean, tools=tools, template_kwargs=template_kwargs)
    if last is None:
        ids = tokenizer.encode(rendered)
        texts.remember(ids, rendered)
        return SplicedPrompt(ids, reused=0)
    info = token_info_of(messages[last], where=f"messages[{last}]")
    assert info is not None  # _last_with_ids found the fields
    prompt, generation = info.prompt_token_ids, info.generation_token_ids
    eot = tokenizer.end_of_turn_id
    closes = bool(generation) and generation[-1] == eot
    needed = prompt.count(eot) + generation.count(eot) + (0 if closes else 1)
    through_last = tokenizer.render(
        clean[: last + 1], tools=tools, add_generation_prompt=False, template_kwargs=template_kwargs
    )
    rendered_turns = through_last.count(tokenizer.end_of_turn_text)
    if rendered_turns != needed:
        raise HistoryRewrittenError(
            f"messages[0..{last}] render with {rendered_turns} end-of-turn tokens "
            f"({tokenizer.end_of_turn_text!r}) but the ids of messages[{last}] hold {needed}: "
            "the history was rewritten (turns removed, inserted or merged), not extended",
            hint="send the conversation as the previous turns returned it, or set token_exact: false",
        )
    previous_text = texts.text_of(prompt, tokenizer)
    _check_unchanged(clean[:last], previous_text)
    end = _end_of_nth(rendered, tokenizer.end_of_turn_text, needed)
    if end < 0:
        raise EndOfTurnMissingError(
            f"the rendered conversation has fewer than {needed} end-of-turn tokens "
            f"({tokenizer.end_of_turn_text!r}); the turn of messages[{last}] is never closed"
        )
    tail = rendered[end:]
    if tokenizer.end_of_turn_strips_right:
        tail = tail.lstrip()
    closing = [] if closes else [eot]
    ids = prompt + generation + closing + tokenizer.encode(tail)
    if texts.max_entries:  # the next turn checks its earlier messages against this prompt's text
        texts.remember(ids, previous_text + tokenizer.decode(generation + closing) + tail)
    return SplicedPrompt(ids, reused=len(prompt) + len(generation))


def _last_with_ids(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("prompt_token_ids") is not None:
            return index
    return None


def _without_token_fields(message: Mapping[str, Any]) -> Mapping[str, Any]:
    if not any(name in message for name in TOKEN_FIELDS):
        return message
    return {key: value for key, value in message.items() if key not in TOKEN_FIELDS}


def _check_unchanged(earlier: Sequence[Mapping[str, Any]], text: str) -> None:
    """Every system, user and tool text before the spliced turn appears, in order, in its prompt's text."""
    position = 0
    for index, message in enumerate(earlier):
        content = message.get("content")
        if message.get("role") == "assistant" or not isinstance(content, str) or not content.strip():
            continue
        found = text.find(content.strip(), position)
        if found < 0:
            raise HistoryRewrittenError(
                f"messages[{index}] ({message.get('role')}) is not in the previous turn's prompt ids: "
                "the history was rewritten (an earlier message changed), not extended",
                hint="send the conversation as the previous turns returned it, or set token_exact: false",
            )
        position = found + len(content.strip())


def _end_of_nth(text: str, token: str, n: int) -> int:
    """The index just after the n-th occurrence of `token` in `text`, or -1."""
    position = -len(token)
    for _ in range(n):
        position = text.find(token, position + len(token))
        if position < 0:
            return -1
    return position + len(token)
