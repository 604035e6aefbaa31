"""Reading the rollout shards `ng_aggregate_rollouts` merges: regular files, integer indices, each rollout once.

    expand_input_glob('a/r-*.jsonl, b/r.jsonl')   the matches, sorted per pattern, de-duplicated,
                                                  `_failures` / `_materialized_inputs` sidecars left out
    refuse_non_regular(shards)                    a directory, FIFO, socket or device among them is a
                                                  DataError naming each, before any file is opened
                                                  (opening a FIFO to read waits for a writer: forever)
    read_shards(shards) -> ShardRows              every row, checked; a rollout seen twice is kept once

A rollout is (agent, `_ng_task_index`, `_ng_rollout_index`); the indices are integers >= 0, as the
collector writes them (a string or a float is refused with its file and line: sorting mixes of
them is what NeMo Gym 0.7.0 fails on, and `ng_report` reads indices as integers). A rollout that two
shards (or one shard twice) hold with the same contents is kept once, from the first shard, and
the pair of shards is named in a warning; with different contents it is a DataError naming both
places, since either result could be the right one and counting both would double its weight.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ng_cli.errors import DataError
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY

__all__ = ["ShardRows", "expand_input_glob", "read_shards", "refuse_non_regular"]

_SIDECARS = ("_failures", "_materialized_inputs")
_SHOWN = 5
"""How many places a message lists before it says how many more there are."""


@dataclass(frozen=True)
class ShardRows:
    """The rows of every shard, each rollout once, and what was dropped."""

    rows: list[dict[str, Any]]
    dropped: int
    """Rows left out because an earlier row (same shard or another) was the same rollout, same contents."""
    warnings: list[str]
    """One line per pair of shards that repeat rollouts, naming both."""


def expand_input_glob(input_glob: str) -> list[Path]:
    """Sorted matches of each pattern, in pattern order, de-duplicated; sidecars left out."""
    seen: dict[str, None] = {}
    for pattern in (p.strip() for p in input_glob.split(",")):
        for match in sorted(glob.glob(pattern)) if pattern else ():
            if not Path(match).stem.endswith(_SIDECARS):
                seen.setdefault(match, None)
    return [Path(match) for match in seen]


def refuse_non_regular(shards: Sequence[Path]) -> None:
    """DataError naming every match that is not a regular file (or cannot be looked at); opens nothing."""
    problems = []
    for shard in shards:
        try:
            mode = os.stat(shard).st_mode  # follows a symlink: what matters is what it points at
        except OSError as exc:
            problems.append(f"{shard}: cannot be read ({exc.strerror or type(exc).__name__})")
            continue
        if not stat.S_ISREG(mode):
            problems.append(f"{shard}: {_kind(mode)}, not a rollouts file")
    if problems:
        raise DataError(
            f"input_glob matched {len(problems)} path(s) that are not readable files, "
            "so nothing was read or written:\n  " + "\n  ".join(problems),
            hint="narrow +input_glob to the rollout files, e.g. 'results/rollouts-*.jsonl'",
        )


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


@dataclass
class _Repeats:
    """The rollouts a later shard repeats of an earlier one: how many, and the first as an example."""

    first: str
    count: int = 0
    more: list[str] = field(default_factory=list)


def read_shards(shards: Sequence[Path]) -> ShardRows:
    """Every shard's rows in order; a rollout seen again is dropped (same contents) or refused (not)."""
    seen: dict[tuple[str, int, int], tuple[Path, int, dict[str, Any]]] = {}
    rows: list[dict[str, Any]] = []
    same: dict[tuple[Path, Path], _Repeats] = {}
    different: dict[tuple[Path, Path], _Repeats] = {}
    for shard in shards:
        for line_no, row in _shard_rows(shard):
            key = (_agent_of(row), row[TASK_KEY], row[ROLLOUT_KEY])
            first = seen.get(key)
            if first is None:
                seen[key] = (shard, line_no, row)
                rows.append(row)
                continue
            where = (
                f"task {key[1]}, rollout {key[2]} of agent {key[0]!r}: "
                f"{first[0]}:{first[1]} and {shard}:{line_no}"
            )
            repeats = (same if row == first[2] else different).setdefault((first[0], shard), _Repeats(where))
            repeats.count += 1
            if len(repeats.more) < _SHOWN:
                repeats.more.append(where)
    if different:
        places = [where for repeats in different.values() for where in repeats.more]
        total = sum(repeats.count for repeats in different.values())
        listed = places[:_SHOWN] + ([f"... and {total - _SHOWN} more"] if total > _SHOWN else [])
        raise DataError(
            f"{total} rollout(s) appear twice with different contents, so nothing was written "
            "(which one is right cannot be told, and both would count it twice):\n  " + "\n  ".join(listed),
            hint="a rollout must be collected once: keep one of the two shards out of +input_glob",
        )
    warnings = [_repeat_warning(first, later, repeats) for (first, later), repeats in same.items()]
    return ShardRows(rows=rows, dropped=sum(r.count for r in same.values()), warnings=warnings)


def _repeat_warning(first: Path, later: Path, repeats: _Repeats) -> str:
    whose = "itself" if first == later else str(first)
    return (
        f"{later} repeats {repeats.count} rollout(s) of {whose} with the same contents "
        f"(the first: {repeats.first}); each is counted once, from {first}"
    )


def _shard_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) of one shard; blank lines skipped; a bad line is a DataError naming it."""
    try:
        # O_NONBLOCK: a FIFO put in the file's place since refuse_non_regular opens without
        # waiting for a writer, and is refused below; for a regular file it changes nothing.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise DataError(f"{path}: {_kind(mode)}, not a rollouts file; nothing was written")
        for line_no, raw in enumerate(file, start=1):
            if not raw.strip():
                continue
            try:
                row = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise DataError(f"{path}:{line_no}: not valid JSON ({exc})") from None
            if not (isinstance(row, dict) and TASK_KEY in row and ROLLOUT_KEY in row):
                raise DataError(f"{path}:{line_no}: not a rollout row (no {TASK_KEY} and {ROLLOUT_KEY})")
            for key in (TASK_KEY, ROLLOUT_KEY):
                value = row[key]
                if type(value) is not int or value < 0:  # bool is an int subclass: refused too
                    raise DataError(
                        f"{path}:{line_no}: {key} must be an integer >= 0, "
                        f"got {orjson.dumps(value).decode()} ({type(value).__name__})",
                        hint="rollout indices are integers, as ng_collect_rollouts writes them",
                    )
            yield line_no, row


def _agent_of(row: Mapping[str, Any]) -> str:
    """The agent a row's metrics go to, as `materialized.aggregate_entries` groups them."""
    ref = row.get("agent_ref")
    return str(ref.get("name") if isinstance(ref, Mapping) else ref)
