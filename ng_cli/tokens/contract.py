"""The token-id contract of `return_token_id_information: true`.

Each model call's LAST output item carries three fields, which travel back unchanged on the next
turn's input items:

    prompt_token_ids      the exact prompt the engine saw
    generation_token_ids  the generated ids (one per logprob)
    generation_log_probs  the sampled token's logprob at each step (finite, <= 0); absent when the
                          model server runs with `return_generation_log_probs: false` (trainers
                          that recompute logprobs: vLLM's logprobs cost ~15-23% of its throughput)

Sources in vLLM's chat response, in order of preference:
1. `return_token_ids: true` -> top-level `prompt_token_ids` and `choices[0].token_ids`;
2. `return_tokens_as_token_ids: true` -> each `logprobs.content[i].token` is "token_id:<n>";
   the prompt ids must then come from `POST /tokenize`, which the server calls (this module does
   no I/O) when `needs_prompt_tokenization(completion)` says so, passing the result as
   `prompt_token_ids_fallback`.

Every violation is an `InvalidOutputError` naming the field and, where there is one, the index.
The checks are C-speed (`array("Q", ids)` rejects negatives and non-ints in one pass): about
0.4 ms for a 4k-token generation with a 30k-token prompt on one slow core.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from ng_cli.errors import InvalidOutputError

__all__ = [
    "TOKEN_FIELDS",
    "PromptTokenIdsMissingError",
    "TokenContractError",
    "TokenInfo",
    "attach_token_info",
    "extract_token_info",
    "needs_prompt_tokenization",
    "token_info_of",
]

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
_TOKEN_ID_PREFIX = "token_id:"
_logprob_of = itemgetter("logprob")


class TokenContractError(InvalidOutputError):
    """vLLM's answer (or an item's token fields) breaks the token-id contract."""


class PromptTokenIdsMissingError(TokenContractError):
    """No prompt ids: vLLM did not honour `return_token_ids` and no `/tokenize` result was given."""


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """The three token-id fields of one model call."""

    prompt_token_ids: list[int]
    generation_token_ids: list[int]
    generation_log_probs: list[float] | None
    """None: not asked of vLLM (`return_generation_log_probs: false`); the item then has no such field."""

    def as_fields(self) -> dict[str, list[int] | list[float]]:
        """The fields as they appear on a Responses item."""
        fields: dict[str, list[int] | list[float]] = {
            "prompt_token_ids": self.prompt_token_ids,
            "generation_token_ids": self.generation_token_ids,
        }
        if self.generation_log_probs is not None:
            fields["generation_log_probs"] = self.generation_log_probs
        return fields


def needs_prompt_tokenization(completion: Mapping[str, Any]) -> bool:
    """True when vLLM sent no `prompt_token_ids` (older vLLM): the server must call /tokenize."""
    return completion.get("prompt_token_ids") is None


def extract_token_info(
    completion: Mapping[str, Any],
    *,
    prompt_token_ids_fallback: list[int] | None = None,
    with_log_probs: bool = True,
) -> TokenInfo:
    """Read and check the token ids of a chat completion (`n == 1`); raises TokenContractError.

    `with_log_probs=False`: no logprobs were asked for, so the generated ids must come from
    `return_token_ids` (`choices[0].token_ids`) and `generation_log_probs` is None."""
    choice = _single_choice(completion)
    generation = choice.get("token_ids")
    if not with_log_probs:
        if generation is None:
            raise TokenContractError(
                "vLLM returned no choices[0].token_ids; without logprobs the generated ids come only from "
                "return_token_ids",
                hint="use vLLM >= 0.10.2, or return_generation_log_probs: true",
            )
        return TokenInfo(_prompt_ids(completion, prompt_token_ids_fallback), _checked(generation), None)
    entries = _logprob_entries(choice)
    log_probs = _log_probs(entries)
    if generation is None:
        generation = _ids_from_logprob_tokens(entries)
    prompt = _prompt_ids(completion, prompt_token_ids_fallback)
    _check_ids(generation, "choices[0].token_ids")
    if len(generation) != len(log_probs):
        raise TokenContractError(
            f"vLLM returned {len(generation)} generation token ids but {len(log_probs)} logprobs; "
            "they must match one to one"
        )
    return TokenInfo(prompt, generation, log_probs)


def _checked(generation: Any) -> list[int]:
    _check_ids(generation, "choices[0].token_ids")
    return list(generation)


def _prompt_ids(completion: Mapping[str, Any], fallback: list[int] | None) -> list[int]:
    """vLLM's `prompt_token_ids`, else the /tokenize result; checked."""
    prompt = completion.get("prompt_token_ids")
    if prompt is None:
        prompt = fallback
    if prompt is None:
        raise PromptTokenIdsMissingError(
            "vLLM returned no prompt_token_ids and no /tokenize result was supplied",
            hint="use vLLM >= 0.10.2 (return_token_ids), or tokenize the prompt via POST /tokenize",
        )
    _check_ids(prompt, "prompt_token_ids")
    return list(prompt)


def attach_token_info(items: Sequence[MutableMapping[str, Any]], info: TokenInfo) -> None:
    """Put the three fields on the last output item (the contract's carrier)."""
    if not items:
        raise TokenContractError("a response with token ids needs at least one output item")
    items[-1].update(info.as_fields())


def token_info_of(item: Mapping[str, Any], *, where: str = "item") -> TokenInfo | None:
    """Check the token fields of an input item (they are not validated on parse); None if absent.

    `generation_log_probs` may be absent alone (a server with `return_generation_log_probs: false`)."""
    present = [name for name in TOKEN_FIELDS if item.get(name) is not None]
    if not present:
        return None
    required = TOKEN_FIELDS[:2]
    if not set(required) <= set(present):
        missing = sorted(set(required) - set(present))
        raise TokenContractError(
            f"{where} carries {present} but not {missing}; send prompt_token_ids and generation_token_ids "
            "(and generation_log_probs) or none"
        )
    prompt, generation = item["prompt_token_ids"], item["generation_token_ids"]
    log_probs = item.get("generation_log_probs")
    for name, value in zip(TOKEN_FIELDS, (prompt, generation, log_probs), strict=True):
        if value is not None and not isinstance(value, list):
            raise TokenContractError(f"{where}.{name} must be a list, got {type(value).__name__}")
    _check_ids(prompt, f"{where}.prompt_token_ids")
    _check_ids(generation, f"{where}.generation_token_ids")
    if log_probs is None:
        return TokenInfo(prompt, generation, None)
    _check_log_prob_values(log_probs, f"{where}.generation_log_probs")
    if len(generation) != len(log_probs):
        raise TokenContractError(
            f"{where} has {len(generation)} generation_token_ids but {len(log_probs)} generation_log_probs"
        )
    return TokenInfo(prompt, generation, log_probs)


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------


def _single_choice(completion: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = completion.get("choices")
    if not isinstance(choices, list) or len(choices) != 1:
        count = len(choices) if isinstance(choices, list) else choices
        raise TokenContractError(
            f"token ids need exactly one choice (n == 1); vLLM returned choices={count!r}"
        )
    choice = choices[0]
    if not isinstance(choice, Mapping):
        raise TokenContractError(f"choices[0] must be an object, got {type(choice).__name__}")
    return choice


def _logprob_entries(choice: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    logprobs = choice.get("logprobs")
    entries = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(entries, list):
        raise TokenContractError(
            "vLLM returned no choices[0].logprobs.content; the request must set logprobs=true",
            hint="check that extra_body does not override logprobs",
        )
    return entries


def _log_probs(entries: list[Mapping[str, Any]]) -> list[float]:
    try:
        log_probs = list(map(_logprob_of, entries))
    except (KeyError, TypeError):
        index = next(i for i, e in enumerate(entries) if not isinstance(e, Mapping) or "logprob" not in e)
        raise TokenContractError(f"choices[0].logprobs.content[{index}] has no 'logprob'") from None
    _check_log_prob_values(log_probs, "choices[0].logprobs.content[].logprob")
    return log_probs


def _check_log_prob_values(log_probs: list[Any], where: str) -> None:
    """Finite, <= 0 numbers; the fast path is one sum() and one max()."""
    try:
        is_ok = math.isfinite(sum(log_probs)) and (not log_probs or max(log_probs) <= 0)
    except TypeError:
        is_ok = False
    if is_ok:
        return
    for index, value in enumerate(log_probs):
        if type(value) not in (float, int) or not math.isfinite(value) or value > 0:
            raise TokenContractError(f"{where} [{index}] = {value!r}: a logprob must be a finite number <= 0")
    raise TokenContractError(f"{where}: logprobs must be finite numbers <= 0")


def _check_ids(ids: Any, where: str) -> None:
    """Non-negative ints; `array("Q", ...)` checks a list in C and fails on the first bad one."""
    if not isinstance(ids, list):
        raise TokenContractError(f"{where} must be a list of ints, got {type(ids).__name__}")
    try:
        array("Q", ids)
    except (OverflowError, TypeError):
        pass
    else:
        return
    for index, value in enumerate(ids):
        if type(value) is not int or value < 0:
            raise TokenContractError(f"{where}[{index}] = {value!r}: a token id must be a non-negative int")
    raise TokenContractError(f"{where}: token ids must be non-negative ints")


def _ids_from_logprob_tokens(entries: list[Mapping[str, Any]]) -> list[int]:
    """Parse "token_id:<n>" tokens (vLLM's `return_tokens_as_token_ids`)."""
    ids: list[int] = []
    for index, entry in enumerate(entries):
        token = entry.get("token")
        if not isinstance(token, str) or not token.startswith(_TOKEN_ID_PREFIX):
            raise TokenContractError(
                f"vLLM returned no choices[0].token_ids and logprobs.content[{index}].token is "
                f"{token!r}, not 'token_id:<n>'",
                hint="request return_token_ids=true (vLLM >= 0.10.2) or return_tokens_as_token_ids=true",
            )
        try:
            ids.append(int(token[len(_TOKEN_ID_PREFIX) :]))
        except ValueError:
            raise TokenContractError(
                f"logprobs.content[{index}].token = {token!r} has no integer id"
            ) from None
    return ids
