"""Re-tokenization drift in rollouts: does each model call's prompt start with everything seen before?

A trainer concatenates a rollout's turns into one sequence, so turn k's `prompt_token_ids` must
begin with turn k-1's `prompt_token_ids + generation_token_ids` exactly (the contiguity RL needs).
A rollout *drifts* when some turn does not; the first divergence is reported as (turn, position,
the id seen before, the id found). The model calls of a rollout are the output items that carry
`prompt_token_ids` (the last item of each call, per the token-id contract), in order.

Token ids that are not integers in [0, 2^31) (a string, a float, a huge or negative number) make
a rollout *invalid*: `ng_check_tokens` names the item and position on that row's line and goes
on (exit 2 at the end); the collector counts such a rollout as drifted, since a trainer cannot
use it either.

Used by `ng_check_tokens` (per rollout and in total) and by the collector, which counts drifted
rollouts in its summary and metrics for every run with token ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ng_cli.errors import DataError

__all__ = [
    "MAX_TOKEN_ID",
    "Divergence",
    "DriftReport",
    "RolloutTokens",
    "check_file",
    "check_response",
    "read_rollout_tokens",
]


MAX_TOKEN_ID = 2**31 - 1
"""Largest id accepted: vocabularies have a few hundred thousand tokens, trainers keep ids as int32."""


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where a turn's prompt stops repeating the history: `expected` was seen before, `found` is there."""

    turn: int
    """1-based index of the model call whose prompt diverges (>= 2)."""
    position: int
    """Index in that call's `prompt_token_ids`."""
    expected: int | None
    found: int | None
    """None: the prompt ends before the history does."""


@dataclass(frozen=True, slots=True)
class RolloutTokens:
    """The token-id check of one rollout."""

    turns: int
    divergence: Divergence | None

    @property
    def is_drifted(self) -> bool:
        return self.divergence is not None


def check_response(response: Any) -> RolloutTokens | None:
    """Check one rollout's `response`; None when no output item carries token ids.

    ValueError, naming the item and position, when its ids are not lists of token ids."""
    output = response.get("output") if isinstance(response, Mapping) else None
    if not isinstance(output, list):
        return None
    calls = [
        (index, item)
        for index, item in enumerate(output)
        if isinstance(item, Mapping) and item.get("prompt_token_ids") is not None
    ]
    if not calls:
        return None
    history: list[int] = []
    for turn, (index, call) in enumerate(calls, start=1):
        prompt = _ids(call, index, "prompt_token_ids")
        if turn > 1 and prompt[: len(history)] != history:
            return RolloutTokens(len(calls), _first_difference(turn, history, prompt))
        history = prompt + _ids(call, index, "generation_token_ids")
    return RolloutTokens(len(calls), None)


def read_rollout_tokens(
    path: Path,
) -> Iterator[tuple[int, Mapping[str, Any], RolloutTokens | None, str | None]]:
    """(line number, row, its check, why its ids are invalid) for every row of a rollouts file.

    A line that is not a JSON object is a DataError (the file is not a rollouts file); a row with
    invalid token ids is that row's problem, and the rows after it are still checked."""
    try:
        handle = path.open("rb")
    except OSError as error:
        raise DataError(f"{path}: cannot be read: {error.strerror}") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                raise DataError(f"{path}:{number}: not a JSON line ({error})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
            try:
                tokens = check_response(row.get("response"))
            except ValueError as error:
                yield number, row, None, f"response.{error}"
                continue
            yield number, row, tokens, None


@dataclass
class DriftReport:
    """`ng_check_tokens`' findings over one rollouts file: a line per rollout, the totals."""

    path: Path
    lines: list[str]
    rollouts: int = 0
    with_token_ids: int = 0
    drifted: int = 0
    invalid: int = 0

    def summary(self) -> str:
        invalid = f"; {self.invalid} rollouts with invalid token ids" if self.invalid else ""
        if not self.with_token_ids:
            return (
                f"{self.path}: none of {self.rollouts} rollouts carries token ids; nothing to check{invalid}"
            )
        return (
            f"{self.path}: {self.drifted} of {self.with_token_ids} rollouts with token ids drifted"
            f"{invalid} ({self.rollouts - self.with_token_ids - self.invalid} without token ids)"
        )

    @property
    def exit_code(self) -> int:
        """0: no drift; 1: some rollout drifted; 2: some row's token ids are not token ids."""
        return 2 if self.invalid else 1 if self.drifted else 0


def check_file(path: Path, *, token_text: Callable[[int], str] | None = None) -> DriftReport:
    """Check every rollout of `path`; `token_text` (the model's vocabulary) spells diverging ids."""
    report = DriftReport(path, [])
    for number, row, tokens, problem in read_rollout_tokens(path):
        report.rollouts += 1
        where = f"line {number}" + _indices(row)
        if problem is not None:
            report.invalid += 1
            report.lines.append(f"{where}: INVALID {problem}")
            continue
        if tokens is None:
            report.lines.append(f"{where}: no token ids")
            continue
        report.with_token_ids += 1
        if tokens.divergence is None:
            report.lines.append(f"{where}: ok ({tokens.turns} turns)")
            continue
        report.drifted += 1
        report.lines.append(f"{where}: DRIFT {_describe(tokens.divergence, token_text)}")
    return report


def _indices(row: Mapping[str, Any]) -> str:
    task, rollout = row.get("_ng_task_index"), row.get("_ng_rollout_index")
    return f" (task {task}, rollout {rollout})" if task is not None else ""


def _describe(divergence: Divergence, token_text: Callable[[int], str] | None) -> str:
    def shown(token: int | None) -> str:
        if token is None:
            return "end of prompt"
        return f"{token_text(token)!r} (id {token})" if token_text else f"id {token}"

    return (
        f"turn {divergence.turn}'s prompt diverges at position {divergence.position}: "
        f"{shown(divergence.found)} where turn {divergence.turn - 1} had {shown(divergence.expected)}"
    )


def _ids(item: Mapping[str, Any], index: int, key: str) -> list[int]:
    value = item.get(key)
    if not isinstance(value, list):
        raise ValueError(f"output[{index}].{key} is {type(value).__name__}, not a list of token ids")
    for position, token in enumerate(value):
        if type(token) is not int or not 0 <= token <= MAX_TOKEN_ID:  # bool is an int subclass
            raise ValueError(
                f"output[{index}].{key}[{position}] is {_short(token)}, "
                f"not a token id (an integer from 0 to {MAX_TOKEN_ID})"
            )
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _first_difference(turn: int, history: Sequence[int], prompt: Sequence[int]) -> Divergence:
    for position, (expected, found) in enumerate(zip(history, prompt, strict=False)):
        if expected != found:
            return Divergence(turn, position, expected, found)
    return Divergence(turn, len(prompt), history[len(prompt)], None)
