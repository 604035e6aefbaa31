"""The output JSONL: building a result row, appending it untearably, and reading it back.

Each finished rollout is one complete line written with a single `os.write` on an O_APPEND
descriptor: there is no user-space buffer to lose, and the kernel appends the whole line or
nothing as far as a killed process is concerned (SIGKILL included). A torn final line can still
come from elsewhere (a full disk, another tool, a power cut); `repair_torn_tail` finds it on
resume, keeps it if it is a complete row that only lacks its newline, and truncates it otherwise.
"""

from __future__ import annotations

import fcntl
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ng_cli.errors import ConfigError, DataError, InvalidOutputError, NgError
from ng_cli.rollouts.versions import row_versions
from ng_cli.tokens.drift import check_response

__all__ = [
    "ROLLOUT_KEY",
    "TASK_KEY",
    "Outcome",
    "ResultWriter",
    "TailRepair",
    "cannot_write",
    "outcome_of",
    "read_results",
    "repair_torn_tail",
    "to_output_line",
]

TASK_KEY = "_ng_task_index"
ROLLOUT_KEY = "_ng_rollout_index"


@dataclass(frozen=True)
class Outcome:
    """The numbers the collector keeps about one successful rollout (not the row itself)."""

    task_index: int
    rollout_index: int
    reward: float
    output_tokens: int
    incomplete_reason: str | None
    """`response.incomplete_details.reason` when `response.status == "incomplete"`."""
    token_drift: bool | None = None
    """Whether a turn's prompt ids fail to start with the ids seen before (`ng_cli.tokens.drift`);
    None when the rollout carries no token ids."""
    weight_version: Mapping[str, Any] | None = None
    """The row's `weight_version` (`rollouts.versions`); None when its calls carried no stamp."""


def to_output_line(
    row: Mapping[str, Any],
    result: Any,
    *,
    task_index: int,
    rollout_index: int,
    max_staleness: int | None = None,
) -> tuple[bytes, Outcome]:
    """The JSONL line for a finished rollout: input row + the agent's answer + the stable keys.

    Raises InvalidOutputError when the answer is not an object or has no finite numeric reward:
    a made-up reward would be worse than a counted failure.
    """
    if not isinstance(result, dict):
        raise InvalidOutputError(f"the agent's /run answered {type(result).__name__}, expected a JSON object")
    reward = result.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
        shown = "missing" if "reward" not in result else repr(reward)[:200]
        raise InvalidOutputError(f"the agent's /run answer has no numeric 'reward' (got {shown})")
    output = {**row, **result, TASK_KEY: task_index, ROLLOUT_KEY: rollout_index}
    versions = row_versions(result.get("response"), max_staleness=max_staleness)
    if versions is not None:
        output["weight_version"] = versions
    return orjson.dumps(output, option=orjson.OPT_APPEND_NEWLINE), outcome_of(output)


def outcome_of(output: Mapping[str, Any]) -> Outcome:
    """Reward, generated tokens and incompleteness of an output row (written now or earlier)."""
    response = output.get("response")
    response = response if isinstance(response, dict) else {}
    usage = response.get("usage")
    tokens = usage.get("output_tokens") if isinstance(usage, dict) else None
    reason = None
    if response.get("status") == "incomplete":
        details = response.get("incomplete_details")
        reason = (
            str(details.get("reason")) if isinstance(details, dict) and details.get("reason") else "unknown"
        )
    return Outcome(
        task_index=int(output[TASK_KEY]),
        rollout_index=int(output[ROLLOUT_KEY]),
        reward=float(output["reward"]),
        output_tokens=tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0,
        incomplete_reason=reason,
        token_drift=_token_drift(response),
        weight_version=_versions_of(output.get("weight_version")),
    )


def _versions_of(value: Any) -> Mapping[str, Any] | None:
    if (
        isinstance(value, Mapping)
        and isinstance(value.get("start"), int)
        and isinstance(value.get("end"), int)
    ):
        return value
    return None


def _token_drift(response: Mapping[str, Any]) -> bool | None:
    """Drift of a row's token ids; malformed ids count as drift (a trainer could not use them)."""
    try:
        tokens = check_response(response)
    except ValueError:
        return True
    return None if tokens is None else tokens.is_drifted


class ResultWriter:
    """Appends complete lines to the output file, which it holds an exclusive lock on.

    The lock (flock, released by the kernel even on SIGKILL) stops a second collector from
    interleaving rows into the same output.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise ConfigError(
                f"{path} is being written by another ng_collect_rollouts process",
                hint="wait for it to finish, or choose another +output_jsonl_fpath",
            ) from None

    def truncate(self) -> None:
        """Empty the file in place (for +overwrite=true), keeping the lock."""
        os.ftruncate(self._fd, 0)

    def write(self, line: bytes) -> None:
        """One `os.write` per line; a short write (disk full) is finished, then reported by resume."""
        try:
            written = os.write(self._fd, line)
            while written < len(line):
                written += os.write(self._fd, line[written:])
        except OSError as exc:
            raise cannot_write(self.path, exc) from exc

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


def cannot_write(path: Path, exc: OSError) -> NgError:
    """Writing results failed (disk full, file removed): end the run, keep what was written."""
    return NgError(
        f"cannot write to {path}: {exc.strerror or exc}; the rollouts written so far are kept",
        hint="fix the cause (e.g. free disk space), then run the same command again to resume",
    )


@dataclass(frozen=True)
class TailRepair:
    """What `repair_torn_tail` found at the end of the file."""

    line: int
    size_bytes: int
    kept: bool
    """True when the tail was a complete row missing only its newline (completed, not cut)."""

    def describe(self, path: Path) -> str:
        action = "completed its missing newline" if self.kept else f"truncated it ({self.size_bytes} bytes)"
        return f"{path}:{self.line}: the last line was torn (no newline at the end); {action}"


def repair_torn_tail(path: Path) -> TailRepair | None:
    """Make the file end with a newline: finish a complete last row, or cut a partial one."""
    if not path.exists():
        return None
    with path.open("r+b") as file:
        size = file.seek(0, os.SEEK_END)
        if size == 0:
            return None
        file.seek(size - 1)
        if file.read(1) == b"\n":
            return None
        start, line_no = _last_line_start(file)
        file.seek(start)
        tail = file.read()
        if _is_result_row(tail):
            file.write(b"\n")
            return TailRepair(line=line_no, size_bytes=len(tail), kept=True)
        file.truncate(start)
        return TailRepair(line=line_no, size_bytes=len(tail), kept=False)


def _last_line_start(file: Any) -> tuple[int, int]:
    """Offset where the last line starts and its 1-based number (counts newlines before it)."""
    file.seek(0)
    newlines = 0
    last_newline_end = 0
    offset = 0
    while chunk := file.read(1 << 20):
        newlines += chunk.count(b"\n")
        position = chunk.rfind(b"\n")
        if position >= 0:
            last_newline_end = offset + position + 1
        offset += len(chunk)
    return last_newline_end, newlines + 1


def _is_result_row(raw: bytes) -> bool:
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(row, dict) and TASK_KEY in row and ROLLOUT_KEY in row and "reward" in row


def read_results(path: Path) -> Iterator[tuple[int, Outcome]]:
    """(line number, outcome) of every row of an output file; a bad line is a DataError."""
    if not path.exists():
        return
    with path.open("rb") as file:
        for line_no, raw in enumerate(file, start=1):
            if not raw.strip():
                continue
            try:
                yield line_no, outcome_of(orjson.loads(raw))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise DataError(
                    f"{path}:{line_no}: not a result row written by ng_collect_rollouts ({type(exc).__name__}: {exc})",
                    hint="the output was edited by something else; fix or remove that line, or start over with "
                    "+overwrite=true",
                ) from exc
