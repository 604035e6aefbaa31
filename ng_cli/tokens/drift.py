"""Re-tokenization drift in rollouts: does each model call's prompt start with everything seen before?

A trainer concatenates a rollout's turns into one sequence, so turn k's `prompt_token_ids` must
begin with turn k-1's `prompt_token_ids + generation_token_ids` exactly (the contiguity RL needs).
A rollout *drifts* when some turn does not; the first divergence is reported as (turn, position,
the id seen before, the id found). The model calls of a rollout are the output items that carry
`prompt_token_ids` (the last item of each call, per the token-id contract), in order.

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
    "Divergence",
    "DriftReport",
    "RolloutTokens",
    "check_file",
    "check_response",
    "read_rollout_tokens",
]


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
    """Check one rollout's `response`; None when no output item carries token ids."""
    output = response.get("output") if isinstance(response, Mapping) else None
    if not isinstance(output, list):
        return None
    calls = [
        item for item in output if isinstance(item, Mapping) and item.get("prompt_token_ids") is not None
    ]
    if not calls:
        return None
    history: list[Any] = []
    for turn, call in enumerate(calls, start=1):
        prompt = _ids(call, "prompt_token_ids")
        if turn > 1 and prompt[: len(history)] != history:
            return RolloutTokens(len(calls), _first_difference(turn, history, prompt))
        history = prompt + _ids(call, "generation_token_ids")
    return RolloutTokens(len(calls), None)


def read_rollout_tokens(path: Path) -> Iterator[tuple[int, Mapping[str, Any], RolloutTokens | None]]:
    """(line number, row, its check) for every row of a rollouts file; a bad line is a DataError."""
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
                yield number, row, check_response(row.get("response"))
            except ValueError as error:
                raise DataError(f"{path}:{number}: response.output: {error}") from None


@dataclass
class DriftReport:
    """`ng_check_tokens`' findings over one rollouts file: a line per rollout, the totals."""

    path: Path
    lines: list[str]
    rollouts: int = 0
    with_token_ids: int = 0
    drifted: int = 0

    def summary(self) -> str:
        if not self.with_token_ids:
            return f"{self.path}: none of {self.rollouts} rollouts carries token ids; nothing to check"
        return (
            f"{self.path}: {self.drifted} of {self.with_token_ids} rollouts with token ids drifted "
            f"({self.rollouts - self.with_token_ids} without token ids)"
        )

    @property
    def exit_code(self) -> int:
        """0: no drift; 1: some rollout drifted."""
        return 1 if self.drifted else 0


def check_file(path: Path, *, token_text: Callable[[int], str] | None = None) -> DriftReport:
    """Check every rollout of `path`; `token_text` (the model's vocabulary) spells diverging ids."""
    report = DriftReport(path, [])
    for number, row, tokens in read_rollout_tokens(path):
        report.rollouts += 1
        where = f"line {number}" + _indices(row)
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


def _ids(item: Mapping[str, Any], key: str) -> list[Any]:
    value = item.get(key)
    if not isinstance(value, list):
        raise ValueError(f"an item's {key} is {type(value).__name__}, not a list of token ids")
    return value


def _first_difference(turn: int, history: Sequence[Any], prompt: Sequence[Any]) -> Divergence:
    for position, (expected, found) in enumerate(zip(history, prompt, strict=False)):
        if expected != found:
            return Divergence(turn, position, expected, found)
    return Divergence(turn, len(prompt), history[len(prompt)], None)
