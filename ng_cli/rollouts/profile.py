"""Reward profile per task, and the curriculum filter on pass rate (`ng_reward_profile`).

    rollouts (+ <stem>_failures.jsonl)  -> per task: rollouts, failed, mean/std/min/max reward, pass rate
    tasks (the collector's input)       -> one profile line per task, in input order
    +keep_pass_rate=[lo,hi]             -> <profile stem>.kept.jsonl: the input rows whose pass rate
                                           lies in [lo, hi] (all-pass and all-fail tasks give a
                                           policy-gradient learner no signal)

Rows are matched by `_ng_task_index` (the collector's task index), never by position in the
rollouts file, which is in completion order. When the collector's fingerprint sits beside the
rollouts, the tasks file must be the one they were collected from. A failed rollout is missing
data, not a reward of 0, unless `+count_failures_as_zero=true`. Memory grows with the number of
tasks and rollouts (a few numbers each), never with the size of the rows.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, field_validator

from ng_cli.errors import DataError
from ng_cli.outputs import check_outputs, reads, write_atomically, writes
from ng_cli.rollouts.failures import read_failures
from ng_cli.rollouts.metrics import passes
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY, read_results
from ng_cli.rollouts.resume import OutputPaths

__all__ = ["ProfileConfig", "ProfileResult", "TaskStats", "check_pass_rate_range", "profile_rewards"]

_HASH_CHUNK_BYTES = 1 << 20


def check_pass_rate_range(value: tuple[float, float] | None) -> tuple[float, float] | None:
    """`keep_pass_rate`'s rule: [lo, hi] with 0 <= lo <= hi <= 1."""
    if value is not None and not 0.0 <= value[0] <= value[1] <= 1.0:
        raise ValueError(f"expected [lo, hi] with 0 <= lo <= hi <= 1, got {list(value)}")
    return value


class ProfileConfig(BaseModel):
    """What to profile (`ng_reward_profile`'s form of our own; its options: `RewardProfileOptions`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    input_jsonl_fpath: Path
    """The tasks: the input the rollouts were collected from."""
    rollouts_jsonl_fpath: Path
    """The collector's output (its `_failures.jsonl` beside it is read too)."""
    output_jsonl_fpath: Path
    """The profile: one line per task."""
    pass_threshold: float | None = None
    """A rollout passes when reward >= this; without it, when reward > 0 (as in the collector)."""
    keep_pass_rate: tuple[float, float] | None = None
    """[lo, hi]: also write the tasks whose pass rate lies in this range to `<stem>.kept.jsonl`."""
    count_failures_as_zero: bool = False
    """Count a failed rollout as reward 0 instead of leaving it out."""

    _range = field_validator("keep_pass_rate")(check_pass_rate_range)


@dataclass(slots=True)
class TaskStats:
    """Running sums for one task's rollouts."""

    rollouts: int = 0
    failed: int = 0
    passed: int = 0
    total: float = 0.0
    squares: float = 0.0
    low: float = math.inf
    high: float = -math.inf

    def add(self, reward: float, *, passed: bool) -> None:
        self.rollouts += 1
        self.passed += passed
        self.total += reward
        self.squares += reward * reward
        self.low = min(self.low, reward)
        self.high = max(self.high, reward)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.rollouts if self.rollouts else None

    def summary(self) -> dict[str, Any]:
        if not self.rollouts:
            empty = dict.fromkeys(("mean_reward", "std_reward", "min_reward", "max_reward", "pass_rate"))
            return {"rollouts": 0, "failed": self.failed, **empty}
        mean = self.total / self.rollouts
        return {
            "rollouts": self.rollouts,
            "failed": self.failed,
            "mean_reward": mean,
            "std_reward": math.sqrt(max(0.0, self.squares / self.rollouts - mean * mean)),
            "min_reward": self.low,
            "max_reward": self.high,
            "pass_rate": self.pass_rate,
        }


@dataclass(frozen=True)
class ProfileResult:
    """What was written, and the counts the command prints."""

    profile: Path
    kept_path: Path | None
    tasks: int
    profiled: int
    """Tasks with at least one (counted) rollout."""
    all_pass: int
    all_fail: int
    kept: int
    dropped_low: int
    dropped_high: int
    no_rollouts: int


def profile_rewards(config: ProfileConfig) -> ProfileResult:
    """Read the rollouts, check them against the tasks, write the profile (and the kept rows).

    An output that is one of the files read, or cannot be written, is a ConfigError first."""
    paths = OutputPaths.for_output(config.rollouts_jsonl_fpath)
    profile = config.output_jsonl_fpath
    kept_path = _kept_path(profile) if config.keep_pass_rate else None
    check_outputs(
        writes("output_jsonl_fpath", profile, profile, *filter(None, [kept_path])),
        reads("input_jsonl_fpath", config.input_jsonl_fpath)
        + reads("rollouts_jsonl_fpath", paths.output, *paths.all[1:]),
    )
    if not paths.output.is_file():
        raise DataError(
            f"rollouts file not found: {paths.output}", hint="+rollouts_jsonl_fpath=<the collector's output>"
        )
    num_tasks = _check_tasks(config, paths)
    stats = _read_stats(config, paths, num_tasks)
    counts = _write_outputs(config, stats, profile, kept_path)
    return ProfileResult(profile=profile, kept_path=kept_path, tasks=num_tasks, **counts)


def _kept_path(profile: Path) -> Path:
    """`profile.jsonl` -> `profile.kept.jsonl`."""
    stem = profile.with_suffix("")
    return stem.with_name(stem.name + ".kept.jsonl")


def _tasks(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(task index, line number, raw line) of every non-blank line, as the collector counts them."""
    index = 0
    with path.open("rb") as file:
        for line_no, raw in enumerate(file, start=1):
            if raw.strip():
                yield index, line_no, raw
                index += 1


def _check_tasks(config: ProfileConfig, paths: OutputPaths) -> int:
    """The number of tasks; DataError if the collector's fingerprint names another input file."""
    path = config.input_jsonl_fpath
    if not path.is_file():
        raise DataError(
            f"tasks file not found: {path}", hint="+input_jsonl_fpath=<the input the rollouts came from>"
        )
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_HASH_CHUNK_BYTES):
            digest.update(chunk)
    count = sum(1 for _ in _tasks(path))
    recorded = _recorded_input_sha256(paths.fingerprint)
    if recorded is not None and recorded != digest.hexdigest():
        raise DataError(
            f"{paths.output} was collected from another input than {path} "
            f"(sha256 {recorded[:12]}... in {paths.fingerprint.name}, {digest.hexdigest()[:12]}... now)",
            hint="pass the +input_jsonl_fpath the rollouts were collected from",
        )
    return count


def _recorded_input_sha256(path: Path) -> str | None:
    """The input hash the collector's fingerprint records, if there is a readable one."""
    if not path.is_file():
        return None
    try:
        value = orjson.loads(path.read_bytes()).get("input_sha256")
    except (orjson.JSONDecodeError, AttributeError) as exc:
        raise DataError(f"{path}: unreadable fingerprint ({exc})") from exc
    return value if isinstance(value, str) else None


def _read_stats(config: ProfileConfig, paths: OutputPaths, num_tasks: int) -> dict[int, TaskStats]:
    stats: dict[int, TaskStats] = {}
    seen: set[tuple[int, int]] = set()
    for line_no, outcome in read_results(paths.output):
        if not 0 <= outcome.task_index < num_tasks:
            raise DataError(
                f"{paths.output}:{line_no}: {TASK_KEY}={outcome.task_index}, but {config.input_jsonl_fpath} "
                f"has {num_tasks} tasks",
                hint="pass the +input_jsonl_fpath the rollouts were collected from",
            )
        pair = (outcome.task_index, outcome.rollout_index)
        if pair in seen:
            continue  # a duplicate (e.g. concatenated outputs): the first one counts, as in the collector
        seen.add(pair)
        stats.setdefault(outcome.task_index, TaskStats()).add(
            outcome.reward, passed=passes(outcome.reward, config.pass_threshold)
        )
    for record in read_failures(paths.failures):
        pair = (int(record[TASK_KEY]), int(record[ROLLOUT_KEY]))
        if pair in seen or not 0 <= pair[0] < num_tasks:
            continue
        seen.add(pair)
        task = stats.setdefault(pair[0], TaskStats())
        task.failed += 1
        if config.count_failures_as_zero:
            task.add(0.0, passed=passes(0.0, config.pass_threshold))
    return stats


def _write_outputs(
    config: ProfileConfig, stats: dict[int, TaskStats], profile: Path, kept_path: Path | None
) -> dict[str, int]:
    counts = dict.fromkeys(
        ("profiled", "all_pass", "all_fail", "kept", "dropped_low", "dropped_high", "no_rollouts"), 0
    )
    with write_atomically(profile, *filter(None, [kept_path])) as staged:
        out, kept = staged[0], staged[1] if kept_path else None
        for index, line_no, raw in _tasks(config.input_jsonl_fpath):
            task = stats.get(index, TaskStats())
            rate = task.pass_rate
            line = {TASK_KEY: index, "input_line": line_no, **task.summary()}
            out.write(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
            if rate is None:
                counts["no_rollouts"] += 1
                continue
            counts["profiled"] += 1
            counts["all_pass"] += rate == 1.0
            counts["all_fail"] += rate == 0.0
            if config.keep_pass_rate is None or kept is None:
                continue
            low, high = config.keep_pass_rate
            if rate < low:
                counts["dropped_low"] += 1
            elif rate > high:
                counts["dropped_high"] += 1
            else:
                counts["kept"] += 1
                kept.write(raw if raw.endswith(b"\n") else raw + b"\n")
    return counts
