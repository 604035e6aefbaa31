"""Reading a rollouts file for the report: a stream of rows, and a note for every line it skips.

The report is for looking at what a run produced, so a bad line does not stop it: a torn last
line (a run killed while another tool wrote), a row of another schema, or a line that is not
JSON is skipped and named with its line number, and the report says how many were skipped.
Only a missing or unreadable file is an error (nothing to report on).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ng_cli.errors import DataError
from ng_cli.rollouts.results import Outcome, outcome_of

__all__ = ["Problems", "Row", "read_rows"]

_SHOWN_PROBLEMS = 20


@dataclass(frozen=True)
class Row:
    """One readable rollout row, with where it came from."""

    line: int
    outcome: Outcome
    data: dict[str, Any]


@dataclass
class Problems:
    """Lines that could not be read: the first few in full, the rest counted."""

    path: Path
    count: int = 0
    shown: list[str] = field(default_factory=list)

    def add(self, line: int, why: str) -> None:
        self.count += 1
        if len(self.shown) < _SHOWN_PROBLEMS:
            self.shown.append(f"{self.path}:{line}: {why}")

    def summary(self) -> str:
        more = self.count - len(self.shown)
        lines = self.shown + ([f"... and {more} more"] if more else [])
        return f"{self.path}: skipped {self.count} unreadable lines:\n  " + "\n  ".join(lines)


def read_rows(path: Path, problems: Problems) -> Iterator[Row]:
    """Every readable row of `path`, in file order; unreadable lines go to `problems`."""
    try:
        file = path.open("rb")
    except FileNotFoundError:
        raise DataError(
            f"{path}: no such file",
            hint="give the output of ng_collect_rollouts: ng_report +input_jsonl_fpath=results/out.jsonl",
        ) from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with file:
        for line_no, raw in enumerate(file, start=1):
            if not raw.strip():
                continue
            row = _parse(raw, line_no, problems)
            if row is not None:
                yield row


def _parse(raw: bytes, line_no: int, problems: Problems) -> Row | None:
    is_last_and_open = not raw.endswith(b"\n")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        problems.add(
            line_no,
            "torn last line (no newline, incomplete JSON)" if is_last_and_open else f"not JSON ({exc})",
        )
        return None
    if not isinstance(data, dict):
        problems.add(line_no, f"a JSON {type(data).__name__}, not a rollout row")
        return None
    try:
        outcome = outcome_of(data)
    except (KeyError, TypeError, ValueError) as exc:
        problems.add(
            line_no, f"not a rollout row written by ng_collect_rollouts ({_schema_problem(data, exc)})"
        )
        return None
    if outcome.task_index < 0 or outcome.rollout_index < 0:
        problems.add(line_no, "negative _ng_task_index or _ng_rollout_index")
        return None
    if not math.isfinite(outcome.reward):
        problems.add(line_no, f"reward is {outcome.reward}, not a finite number")
        return None
    return Row(line=line_no, outcome=outcome, data=data)


def _schema_problem(data: dict[str, Any], exc: Exception) -> str:
    if isinstance(exc, KeyError):
        keys = ", ".join(sorted(data)[:8])
        return f"no {exc.args[0]!r} key; its keys: {keys}"
    return f"{type(exc).__name__}: {exc}"
