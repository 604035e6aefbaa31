"""The input JSONL: a streaming validation pass first, then a streaming work pass.

The file is never loaded. `scan_input` reads it once before any rollout starts, parses each
line, and keeps only what later steps need: counts, the sha256 and size of the whole file,
the agent of each task (one small integer), and every problem with its line number. A bad
line therefore fails the command at once, not an hour into the run. `iter_tasks` reads the file
again, lazily, to feed the workers.

A task is one non-blank line among the first `limit` ones; blank lines are skipped and do not
count. `_ng_task_index` is the task's 0-based position among those lines.

With NeMo Gym's `fan_out` ({<the row's agent_ref.name>: [agent, ...]}) a matching row runs once per
listed agent: inside the collector each (row, agent) is a task of its own (its own scoreboard
cells, its agent's metrics), and on the wire and in every file it keeps NeMo Gym's numbering (0.7.0
`_preprocess_raw_rows`): the row's `_ng_task_index`, and `_ng_rollout_index` = the agent's position
in the list x num_repeats + the repeat (`InputSummary.external` / `internal`).

Between the two passes (hours, for a big run) the file must stay what was checked: the work
pass compares the open file's device, inode, size and modification time with the validation
pass's before every task, and a change (truncated, rewritten or appended to in place, replaced
before it was reopened) is a DataError naming the file and both row counts, never a run that
ends "done" with rows missing. A file replaced by a rename after the work pass opened it is
still read as it was: that is the checked content.
"""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ng_cli.errors import DataError

__all__ = [
    "DEFAULT_ROUTE",
    "FanOut",
    "InputSummary",
    "Task",
    "iter_tasks",
    "merge_params",
    "route_agent",
    "scan_input",
    "with_seed",
]

AGENT_SERVER_TYPE = "responses_api_agents"
DEFAULT_ROUTE = "_default"
"""The `agent_map` key for every row no other key matches (NeMo Gym's name; `+agent_name` is it)."""
_MAX_PROBLEMS_SHOWN = 20
_HASH_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class FileState:
    """What tells a file's bytes changed without reading them: same inode, size and mtime."""

    device: int
    inode: int
    size_bytes: int
    mtime_ns: int

    @classmethod
    def of(cls, stat: os.stat_result) -> FileState:
        return cls(stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


@dataclass
class FanOut:
    """Where each task of a fanned-out input comes from: its row, and its agent's place in the list."""

    row_of: array[int] = field(default_factory=lambda: array("Q"))
    slot_of: array[int] = field(default_factory=lambda: array("H"))
    first_task_of_row: array[int] = field(default_factory=lambda: array("Q"))


@dataclass
class InputSummary:
    """What the validation pass learnt about the input, without keeping any row."""

    path: Path
    sha256: str
    size_bytes: int
    num_tasks: int
    agents: list[str]
    """Distinct agent names, in order of first use."""
    first_line_of_agent: dict[str, int]
    task_agents: array[int] = field(repr=False)
    """Index into `agents` for each task (array('H'), two bytes per task)."""
    state: FileState
    """The file as the validation pass read it; the work pass refuses any other."""
    num_rows: int = 0
    """Rows of the input that run (tasks, unless fan_out runs a row on several agents)."""
    fan: FanOut | None = field(default=None, repr=False)
    """Set when fan_out made more tasks than rows."""

    def agent_of(self, task_index: int) -> str:
        return self.agents[self.task_agents[task_index]]

    @property
    def max_slots(self) -> int:
        """The most agents one row runs on."""
        return max(self.fan.slot_of) + 1 if self.fan is not None else 1

    def slot(self, task_index: int) -> int:
        return self.fan.slot_of[task_index] if self.fan is not None else 0

    def external(self, task_index: int, rollout_index: int, num_repeats: int) -> tuple[int, int]:
        """NeMo Gym's (`_ng_task_index`, `_ng_rollout_index`) of a task's repeat."""
        if self.fan is None:
            return task_index, rollout_index
        return self.fan.row_of[task_index], self.fan.slot_of[task_index] * num_repeats + rollout_index

    def internal(self, row_index: int, rollout_index: int, num_repeats: int) -> tuple[int, int] | None:
        """The task and repeat of NeMo Gym's indices; None when this run has no such rollout."""
        if self.fan is None:
            return row_index, rollout_index
        if not 0 <= row_index < self.num_rows or rollout_index < 0:
            return None
        task = self.fan.first_task_of_row[row_index] + rollout_index // num_repeats
        if task >= self.num_tasks or self.fan.row_of[task] != row_index:
            return None
        return task, rollout_index % num_repeats


@dataclass(frozen=True)
class Task:
    """One row of the work pass, ready to send: overrides merged, agent resolved."""

    index: int
    line: int
    """1-based line number in the input file."""
    agent: str
    row: dict[str, Any]


def scan_input(
    path: Path,
    *,
    limit: int | None,
    agent_name: str | None,
    agent_map: Mapping[str, str] | None = None,
    fan_out: Mapping[str, Sequence[str]] | None = None,
) -> InputSummary:
    """Validate every task line (parse, shape, agent); raise one DataError listing all problems."""
    routes = dict(agent_map or {})
    if agent_name is not None:
        routes.setdefault(DEFAULT_ROUTE, agent_name)
    if not path.is_file():
        raise DataError(
            f"input file not found: {path}", hint="pass +input_jsonl_fpath=<an existing .jsonl file>"
        )
    digest = hashlib.sha256()
    agents: dict[str, int] = {}
    first_line: dict[str, int] = {}
    task_agents = array("H")
    fan = FanOut()
    num_rows = 0
    problems: list[str] = []
    with path.open("rb") as file:
        line_no = 0
        for line_no, raw in enumerate(file, start=1):
            digest.update(raw)
            if not raw.strip():
                continue
            if limit is not None and num_rows >= limit:
                break
            fan.first_task_of_row.append(len(task_agents))
            for slot, agent in enumerate(
                _check_line(raw, routes, fan_out, problems, where=f"{path}:{line_no}")
            ):
                index = agents.setdefault(agent or "", len(agents))
                first_line.setdefault(agent or "", line_no)
                task_agents.append(index)
                fan.row_of.append(num_rows)
                fan.slot_of.append(slot)
            num_rows += 1
        while chunk := file.read(_HASH_CHUNK_BYTES):
            digest.update(chunk)
        state = FileState.of(os.fstat(file.fileno()))
    if problems:
        raise _data_error(path, problems)
    if not task_agents:
        raise DataError(f"{path}: no rows to run (the file has {line_no} lines, none of them a JSON row)")
    return InputSummary(
        path=path,
        sha256=digest.hexdigest(),
        size_bytes=state.size_bytes,
        num_tasks=len(task_agents),
        agents=list(agents),
        first_line_of_agent=first_line,
        task_agents=task_agents,
        state=state,
        num_rows=num_rows,
        fan=fan if len(task_agents) > num_rows else None,
    )


def _check_line(
    raw: bytes,
    routes: Mapping[str, str],
    fan_out: Mapping[str, Sequence[str]] | None,
    problems: list[str],
    *,
    where: str,
) -> list[str | None]:
    """The agents the row runs on (one, or fan_out's list), or [None] after recording what is wrong."""
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        problems.append(f"{where}: not valid JSON ({exc})")
        return [None]
    if not isinstance(row, dict):
        problems.append(f"{where}: expected a JSON object, got {type(row).__name__}")
        return [None]
    if not isinstance(row.get("responses_create_params"), dict):
        found = (
            "missing"
            if "responses_create_params" not in row
            else type(row["responses_create_params"]).__name__
        )
        keys = ", ".join(sorted(row)[:10]) or "none"
        problems.append(
            f"{where}: 'responses_create_params' must be an object, got {found} (row keys: {keys})"
        )
        return [None]
    basis = _ref_name(row.get("agent_ref"))  # NeMo Gym keys fan_out by the row's own agent, before agent_map
    if fan_out and basis is not None and basis in fan_out:
        return list(fan_out[basis])
    try:
        return [route_agent(row, routes)]
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return [None]


def route_agent(row: Mapping[str, Any], routes: Mapping[str, str]) -> str:
    """The agent a row runs on, by NeMo Gym's precedence (0.7.0 `_preprocess_raw_rows`):
    `agent_map[<the row's agent_ref.name>]` > `agent_map._default` (what `+agent_name` sets) >
    the row's own `agent_ref`. ValueError when none applies."""
    try:
        own: str | None = row_agent(row)
    except ValueError:
        if DEFAULT_ROUTE not in routes:
            raise
        own = None
    if own is not None and own in routes:
        return routes[own]
    return routes.get(DEFAULT_ROUTE) or str(own)


def row_agent(row: Mapping[str, Any]) -> str:
    """The agent named by a row's `agent_ref` ({type, name} or a plain name); ValueError if none."""
    ref = row.get("agent_ref")
    if isinstance(ref, str) and ref:
        return ref
    if isinstance(ref, dict) and isinstance(ref.get("name"), str) and ref["name"]:
        if ref.get("type", AGENT_SERVER_TYPE) != AGENT_SERVER_TYPE:
            raise ValueError(f"agent_ref.type must be '{AGENT_SERVER_TYPE}', got {ref.get('type')!r}")
        return str(ref["name"])
    if ref is None:
        raise ValueError("the row has no 'agent_ref' and no +agent_name=<agent instance> was given")
    raise ValueError(
        f"agent_ref must be {{type: {AGENT_SERVER_TYPE}, name: <instance>}} or a name, got {ref!r}"
    )


def _data_error(path: Path, problems: list[str]) -> DataError:
    shown = problems[:_MAX_PROBLEMS_SHOWN]
    more = len(problems) - len(shown)
    tail = f"\n  ... and {more} more" if more else ""
    noun = "problem" if len(problems) == 1 else "problems"
    return DataError(
        f"{path}: {len(problems)} bad input {noun}; nothing was run:\n  " + "\n  ".join(shown) + tail,
        hint="fix these lines (or cut the file with +limit=N) and run the same command again",
    )


def iter_tasks(summary: InputSummary, *, params_overrides: Mapping[str, Any]) -> Iterator[Task]:
    """Stream the tasks the validation pass accepted, overrides merged into each row; DataError
    as soon as the file is not the one that pass read."""
    index = rows = 0
    try:
        file = summary.path.open("rb")
    except OSError as exc:
        raise _changed(summary, read=0) from exc
    with file:
        for line_no, raw in enumerate(file, start=1):
            if index >= summary.num_tasks:
                return
            if not raw.strip():
                continue
            if FileState.of(os.fstat(file.fileno())) != summary.state:
                raise _changed(summary, read=rows)
            try:
                parsed = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:  # changed in place within the clock's resolution
                raise _changed(summary, read=rows) from exc
            parsed["responses_create_params"] = merge_params(
                parsed["responses_create_params"], params_overrides
            )
            while index < summary.num_tasks and summary.external(index, 0, 1)[0] == rows:
                agent = summary.agent_of(index)
                row = dict(parsed)
                if _ref_name(row.get("agent_ref")) != agent:
                    row["agent_ref"] = {"type": AGENT_SERVER_TYPE, "name": agent}
                yield Task(index=index, line=line_no, agent=agent, row=row)
                index += 1
            rows += 1
    if index < summary.num_tasks:
        raise _changed(summary, read=rows)


def _changed(summary: InputSummary, *, read: int) -> DataError:
    """The input is not the file the validation pass read: say how, with both row counts."""
    path = summary.path
    try:
        with path.open("rb") as file:
            rows = sum(1 for raw in file if raw.strip())
        now = f"now has {rows} rows ({path.stat().st_size} bytes)"
    except OSError as exc:
        now = f"now cannot be read ({exc.strerror})"
    return DataError(
        f"{path} changed during the collection: it had {summary.num_rows or summary.num_tasks} rows to run "
        f"({summary.size_bytes} bytes) when it was checked and {now}; the collection stopped "
        f"after reading {read} of them",
        hint="the rollouts already written are kept: put the original file back and run the same "
        "command again to finish, or start over on the new file with +overwrite=true",
    )


def _ref_name(ref: Any) -> str | None:
    if isinstance(ref, dict):
        name = ref.get("name")
        return name if isinstance(name, str) else None
    return ref if isinstance(ref, str) else None


def merge_params(params: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The row's Responses create body with the command line's keys on top (nested dicts merge)."""
    merged = dict(params)
    for key, value in overrides.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = merge_params(current, value)
        else:
            merged[key] = value
    return merged


def with_seed(row: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The row with `seed` in `responses_create_params.metadata.extra_body` (NeMo Gym's
    `num_repeats_add_seed`, 0.7.0 `_preprocess_raw_rows`, byte for byte: metadata values are
    strings, so extra_body is a JSON object in a string). vllm_model merges it into the chat body
    last, so it wins over a `seed` the row already has; other model servers ignore it."""
    params = dict(row["responses_create_params"])
    metadata = dict(params.get("metadata") or {})
    extra_body = json.loads(metadata.get("extra_body", "{}"))
    extra_body["seed"] = seed
    metadata["extra_body"] = json.dumps(extra_body)
    params["metadata"] = metadata
    return {**row, "responses_create_params": params}
