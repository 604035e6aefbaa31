"""ng_reward_profile's library: per-task statistics by task index, failures, the curriculum filter."""

from __future__ import annotations

import random
import statistics
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.errors import DataError
from ng_cli.rollouts.profile import ProfileConfig, profile_rewards
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY
from tests.fixtures.rollouts.rollout_rows import write_jsonl

NUM_TASKS = 6
REPEATS = 4


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    rows = [{"responses_create_params": {"input": f"task {i}"}, "id": i} for i in range(NUM_TASKS)]
    path = write_jsonl(tmp_path / "tasks.jsonl", rows)
    with path.open("ab") as file:  # a blank line does not count as a task, as in the collector
        file.write(b"\n")
    return path


def rewards_of(task: int) -> list[float]:
    """Task 0 always passes, task 1 always fails, the others mix; task 5 has no rollouts at all."""
    if task == 5:
        return []
    if task == 0:
        return [1.0] * REPEATS
    if task == 1:
        return [0.0] * REPEATS
    rng = random.Random(task)
    return [rng.choice([0.0, 0.25, 1.0]) for _ in range(REPEATS)]


def write_rollouts(tmp_path: Path, *, failed: set[tuple[int, int]] = frozenset()) -> Path:  # type: ignore[assignment]
    rows = [
        {"responses_create_params": {"input": f"task {t}"}, "reward": r, TASK_KEY: t, ROLLOUT_KEY: k}
        for t in range(NUM_TASKS)
        for k, r in enumerate(rewards_of(t))
        if (t, k) not in failed
    ]
    random.Random(0).shuffle(rows)  # completion order, not input order
    path = write_jsonl(tmp_path / "rollouts.jsonl", rows)
    write_jsonl(
        tmp_path / "rollouts_failures.jsonl",
        [{TASK_KEY: t, ROLLOUT_KEY: k, "kind": "upstream_5xx"} for t, k in sorted(failed)],
    )
    return path


def run(tmp_path: Path, tasks: Path, **options: Any) -> tuple[Any, list[dict[str, Any]]]:
    config = ProfileConfig(
        input_jsonl_fpath=tasks,
        rollouts_jsonl_fpath=tmp_path / "rollouts.jsonl",
        output_jsonl_fpath=tmp_path / "out" / "profile.jsonl",
        **options,
    )
    result = profile_rewards(config)
    return result, read_jsonl(result.profile)


def test_statistics_per_task_are_matched_by_task_index(tmp_path: Path, tasks: Path) -> None:
    write_rollouts(tmp_path)
    result, profile = run(tmp_path, tasks)
    assert [line[TASK_KEY] for line in profile] == list(range(NUM_TASKS))
    for line in profile:
        rewards = rewards_of(line[TASK_KEY])
        assert line["rollouts"] == len(rewards)
        if not rewards:
            assert line["mean_reward"] is None
            assert line["pass_rate"] is None
            continue
        assert line["mean_reward"] == pytest.approx(statistics.fmean(rewards))
        assert line["std_reward"] == pytest.approx(statistics.pstdev(rewards), abs=1e-9)
        assert (line["min_reward"], line["max_reward"]) == (min(rewards), max(rewards))
        assert line["pass_rate"] == sum(r > 0 for r in rewards) / len(rewards)
    assert (result.tasks, result.profiled, result.no_rollouts) == (NUM_TASKS, NUM_TASKS - 1, 1)
    assert (result.all_pass, result.all_fail) == (
        sum(all(r > 0 for r in rewards_of(t)) for t in range(5)),
        sum(not any(r > 0 for r in rewards_of(t)) for t in range(5)),
    )


def test_pass_threshold_is_the_collectors(tmp_path: Path, tasks: Path) -> None:
    write_rollouts(tmp_path)
    _, profile = run(tmp_path, tasks, pass_threshold=0.5)
    for line in profile[:5]:
        rewards = rewards_of(line[TASK_KEY])
        assert line["pass_rate"] == sum(r >= 0.5 for r in rewards) / len(rewards)


def test_failures_are_missing_unless_counted_as_zero(tmp_path: Path, tasks: Path) -> None:
    failed = {(0, 1), (0, 3), (2, 0)}
    write_rollouts(tmp_path, failed=failed)
    _, missing = run(tmp_path, tasks)
    assert (missing[0]["rollouts"], missing[0]["failed"], missing[0]["pass_rate"]) == (2, 2, 1.0)
    _, zero = run(tmp_path, tasks, count_failures_as_zero=True)
    assert (zero[0]["rollouts"], zero[0]["failed"], zero[0]["pass_rate"]) == (4, 2, 0.5)
    assert zero[0]["mean_reward"] == 0.5


def test_keep_pass_rate_writes_the_tasks_in_range_and_counts_the_dropped(tmp_path: Path, tasks: Path) -> None:
    write_rollouts(tmp_path)
    result, profile = run(tmp_path, tasks, keep_pass_rate=(0.1, 0.9))
    rates = {line[TASK_KEY]: line["pass_rate"] for line in profile}
    expected = [t for t, rate in rates.items() if rate is not None and 0.1 <= rate <= 0.9]
    assert result.kept_path == tmp_path / "out" / "profile.kept.jsonl"
    assert [row["id"] for row in read_jsonl(result.kept_path)] == expected
    assert result.kept == len(expected)
    assert result.dropped_low == sum(1 for rate in rates.values() if rate is not None and rate < 0.1)
    assert result.dropped_high == sum(1 for rate in rates.values() if rate is not None and rate > 0.9)
    assert result.dropped_low >= 1
    assert result.dropped_high >= 1


def test_duplicate_rollouts_count_once(tmp_path: Path, tasks: Path) -> None:
    path = write_rollouts(tmp_path)
    path.write_bytes(path.read_bytes() * 2)
    _, profile = run(tmp_path, tasks)
    assert [line["rollouts"] for line in profile] == [len(rewards_of(t)) for t in range(NUM_TASKS)]


def test_a_task_index_beyond_the_tasks_file_is_a_data_error(tmp_path: Path, tasks: Path) -> None:
    write_rollouts(tmp_path)
    tasks.write_bytes(b"".join(tasks.read_bytes().splitlines(keepends=True)[:3]))
    with pytest.raises(DataError, match=r"rollouts.jsonl:\d+: _ng_task_index=\d, but .* has 3 tasks"):
        run(tmp_path, tasks)
    assert not (tmp_path / "out" / "profile.jsonl").exists()


def test_a_fingerprint_of_another_input_is_refused(tmp_path: Path, tasks: Path) -> None:
    write_rollouts(tmp_path)
    (tmp_path / "rollouts_fingerprint.json").write_bytes(orjson.dumps({"input_sha256": "0" * 64}))
    with pytest.raises(DataError, match="collected from another input"):
        run(tmp_path, tasks)


def test_a_bad_range_is_refused() -> None:
    with pytest.raises(ValueError, match="0 <= lo <= hi <= 1"):
        ProfileConfig(
            input_jsonl_fpath=Path("a"),
            rollouts_jsonl_fpath=Path("b"),
            output_jsonl_fpath=Path("c"),
            keep_pass_rate=(0.9, 0.1),
        )
