"""The token-id contract: golden cases for both vLLM sources and every violation, plus
attach_token_info / token_info_of / needs_prompt_tokenization."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ng_cli.errors import InvalidOutputError
from ng_cli.tokens import (
    TokenContractError,
    TokenInfo,
    attach_token_info,
    extract_token_info,
    needs_prompt_tokenization,
    token_info_of,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "conversion" / "tokens"
CASES = [pytest.param(json.loads(path.read_text()), id=path.stem) for path in sorted(FIXTURES.glob("*.json"))]


@pytest.mark.parametrize("case", CASES)
def test_golden(case: dict[str, Any]) -> None:
    completion = case["chat_completion"]
    fallback = case.get("prompt_token_ids_fallback")
    if "expected_error" in case:
        expected = case["expected_error"]
        with pytest.raises(InvalidOutputError) as info:
            extract_token_info(completion, prompt_token_ids_fallback=fallback)
        assert type(info.value).__name__ == expected["type"], str(info.value)
        for fragment in expected["message_contains"]:
            assert fragment in str(info.value), f"{fragment!r} not in {str(info.value)!r}"
        return
    info = extract_token_info(completion, prompt_token_ids_fallback=fallback)
    assert info.as_fields() == case["expected_token_info"]


def test_golden_cases_cover_every_violation() -> None:
    names = {param.id for param in CASES}
    assert {
        "error_two_choices",
        "error_length_mismatch",
        "error_logprob_positive",
        "error_negative_token_id",
    } <= names


def test_needs_prompt_tokenization() -> None:
    assert needs_prompt_tokenization({"choices": []})
    assert needs_prompt_tokenization({"prompt_token_ids": None})
    assert not needs_prompt_tokenization({"prompt_token_ids": [1]})


def test_attach_puts_fields_on_last_item_only() -> None:
    items: list[dict[str, Any]] = [{"type": "reasoning"}, {"type": "message"}]
    attach_token_info(items, TokenInfo([1], [2, 3], [-0.1, -0.2]))
    assert items[0] == {"type": "reasoning"}
    assert items[1] == {
        "type": "message",
        "prompt_token_ids": [1],
        "generation_token_ids": [2, 3],
        "generation_log_probs": [-0.1, -0.2],
    }


def test_attach_needs_an_item() -> None:
    with pytest.raises(TokenContractError, match="at least one output item"):
        attach_token_info([], TokenInfo([1], [], []))


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"prompt_token_ids": [1]}, "not ['generation_token_ids']"),
        (
            {"prompt_token_ids": [1], "generation_token_ids": [2], "generation_log_probs": []},
            "1 generation_token_ids but 0",
        ),
        (
            {"prompt_token_ids": "1", "generation_token_ids": [2], "generation_log_probs": [-1.0]},
            "must be a list",
        ),
        ({"prompt_token_ids": [1], "generation_token_ids": [-2], "generation_log_probs": [-1.0]}, "[0] = -2"),
        ({"prompt_token_ids": [1], "generation_token_ids": [2], "generation_log_probs": [1.0]}, "[0] = 1.0"),
    ],
    ids=["partial", "length_mismatch", "not_a_list", "negative_id", "positive_logprob"],
)
def test_token_info_of_rejects_bad_input_items(item: dict[str, Any], message: str) -> None:
    with pytest.raises(TokenContractError) as info:
        token_info_of(item, where="input[3]")
    assert message in str(info.value)
    assert "input[3]" in str(info.value)


def test_token_info_of_reads_valid_items() -> None:
    assert token_info_of({"type": "message"}) is None
    info = token_info_of(
        {"prompt_token_ids": [1], "generation_token_ids": [2], "generation_log_probs": [-1.0]}
    )
    assert info == TokenInfo([1], [2], [-1.0])


def test_long_generations_are_checked_whole() -> None:
    """A 30k-token prompt and 4k generated tokens: every id and log prob comes through in order.
    (Its cost is a benchmark's business, not a timed assertion's: machines here are shared.)"""
    generated = 4096
    completion = {
        "prompt_token_ids": list(range(30_000)),
        "choices": [
            {
                "message": {"content": "x"},
                "token_ids": list(range(generated)),
                "logprobs": {
                    "content": [{"token": f"token_id:{i}", "logprob": -0.5} for i in range(generated)]
                },
            }
        ],
    }
    fields = extract_token_info(completion).as_fields()
    assert fields["prompt_token_ids"] == list(range(30_000))
    assert fields["generation_token_ids"] == list(range(generated))
    assert fields["generation_log_probs"] == [-0.5] * generated


def test_token_ids_without_log_probs_come_from_return_token_ids() -> None:
    completion = {"prompt_token_ids": [1, 2], "choices": [{"token_ids": [7, 8, 9], "message": {}}]}
    info = extract_token_info(completion, with_log_probs=False)
    assert info.as_fields() == {"prompt_token_ids": [1, 2], "generation_token_ids": [7, 8, 9]}
    with pytest.raises(
        TokenContractError, match="without logprobs the generated ids come only from return_token_ids"
    ):
        extract_token_info({"prompt_token_ids": [1], "choices": [{"message": {}}]}, with_log_probs=False)
    with pytest.raises(TokenContractError, match=r"no choices\[0\].logprobs.content"):
        extract_token_info(completion)  # the default still needs the logprobs


def test_item_without_log_probs_is_accepted_but_not_without_ids() -> None:
    info = token_info_of({"prompt_token_ids": [1], "generation_token_ids": [2]})
    assert info == TokenInfo([1], [2], None)
    with pytest.raises(TokenContractError, match="not \\['generation_token_ids'\\]"):
        token_info_of({"prompt_token_ids": [1], "generation_log_probs": [-0.5]})
    with pytest.raises(TokenContractError, match="1 generation_token_ids but 2 generation_log_probs"):
        token_info_of(
            {"prompt_token_ids": [1], "generation_token_ids": [2], "generation_log_probs": [-0.1, -0.2]}
        )
