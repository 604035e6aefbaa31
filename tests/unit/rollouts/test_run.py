"""Opening a run (fresh, resumed, overwritten) and closing it into failures + metrics files."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from rich.console import Console

from ng_cli.errors import ConfigError, DataError
from ng_cli.rollouts.config import CollectConfig
from ng_cli.rollouts.failures import classify, read_failures
from ng_cli.rollouts.inputs import scan_input
from ng_cli.rollouts.progress import RunStats
from ng_cli.rollouts.results import to_output_line
from ng_cli.rollouts.run import CollectResult, RunFiles, close_run, open_run
from ng_cli.rollouts.summary import render_summary


def make_config(tmp_path: Path, **changes: object) -> CollectConfig:
    source = tmp_path / "in.jsonl"
    if not source.exists():
        source.write_bytes(
            b"".join(orjson.dumps({"responses_create_params": {}, "i": i}) + b"\n" for i in range(3))
        )
    fields = {
        "input_jsonl_fpath": source,
        "output_jsonl_fpath": tmp_path / "out" / "out.jsonl",
        "agent_name": "a",
    }
    return CollectConfig.model_validate({**fields, "num_repeats": 2, **changes})


def finish(
    config: CollectConfig, *, succeed: list[tuple[int, int]], fail: list[tuple[int, int]]
) -> tuple[RunFiles, CollectResult]:
    """Open a run, record the given successes/failures as the collector would, and close it."""
    summary = scan_input(config.input_jsonl_fpath, limit=config.limit, agent_name=config.agent_name)
    files = open_run(config, summary)
    stats = RunStats(total=files.scoreboard.total, already_done=files.scoreboard.done)
    for task, rollout in succeed:
        line, outcome = to_output_line(
            {"i": task}, {"reward": float(rollout)}, task_index=task, rollout_index=rollout
        )
        files.writer.write(line)
        files.scoreboard.record(outcome)
        stats.rollout_succeeded(attempts=1, output_tokens=0)
    for task, rollout in fail:
        failure = classify(TimeoutError(), attempt=3, task_index=task, rollout_index=rollout)
        files.failures.append(failure, agent="a", input_line=task + 1)
        files.scoreboard.record_failure(task, failure.kind.value)
        stats.rollout_failed(failure)
    files.close()
    return files, close_run(config, files, stats)


def test_fresh_run_writes_all_four_files(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    files, result = finish(config, succeed=[(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)], fail=[(1, 1)])
    paths = files.paths
    assert paths.output.read_bytes().count(b"\n") == 5
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in read_failures(paths.failures)] == [(1, 1)]
    assert orjson.loads(paths.fingerprint.read_bytes())["num_repeats"] == 2
    metrics = orjson.loads(paths.metrics.read_bytes())
    assert (metrics["succeeded"], metrics["failed"], metrics["total_rollouts"]) == (5, 1, 6)
    assert metrics["agents"]["a"]["tasks_complete"] == 2
    assert (result.succeeded, result.failed, result.exit_code) == (5, 1, 1)


def test_resume_reads_back_done_pairs_and_keeps_only_new_failures(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    finish(config, succeed=[(0, 0), (0, 1)], fail=[(1, 0), (1, 1), (2, 0)])
    summary = scan_input(config.input_jsonl_fpath, limit=None, agent_name="a")
    files = open_run(config, summary)
    try:
        assert files.resumed == 2
        assert files.retrying_failed == 3
        assert files.scoreboard.is_done(0, 1)
        assert not files.scoreboard.is_done(1, 0)
    finally:
        files.close()
    files, result = finish(config, succeed=[(1, 0), (1, 1), (2, 0)], fail=[(2, 1)])
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in read_failures(files.paths.failures)] == [
        (2, 1)
    ]
    assert (result.succeeded, result.failed) == (5, 1)
    assert result.metrics["run"]["resumed_rollouts"] == 2


def test_a_complete_resume_removes_the_failures_file(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    finish(config, succeed=[(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)], fail=[(2, 1)])
    files, result = finish(config, succeed=[(2, 1)], fail=[])
    assert not files.paths.failures.exists()
    assert result.exit_code == 0


def test_resume_repairs_a_torn_tail_and_says_so(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    files, _ = finish(config, succeed=[(0, 0)], fail=[])
    with files.paths.output.open("ab") as out:
        out.write(b'{"_ng_task_index": 0, "_ng_rollout_index": 1, "rew')
    files, result = finish(config, succeed=[(0, 1)], fail=[])
    assert any("torn" in note for note in result.notes)
    assert [
        orjson.loads(line)["_ng_rollout_index"] for line in files.paths.output.read_bytes().splitlines()
    ] == [0, 1]


def test_overwrite_starts_from_nothing(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    finish(config, succeed=[(0, 0)], fail=[(0, 1)])
    other = make_config(tmp_path, num_repeats=1, overwrite=True)
    files, result = finish(other, succeed=[(1, 0)], fail=[])
    assert files.paths.output.read_bytes().count(b"\n") == 1
    assert not files.paths.failures.exists()
    assert result.metrics["run"]["resumed_rollouts"] == 0


def test_a_changed_config_is_refused_before_touching_anything(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    files, _ = finish(config, succeed=[(0, 0)], fail=[])
    before = files.paths.output.read_bytes()
    with pytest.raises(ConfigError, match="num_repeats: 2 -> 3"):
        finish(make_config(tmp_path, num_repeats=3), succeed=[], fail=[])
    assert files.paths.output.read_bytes() == before
    finish(config, succeed=[], fail=[])  # and the lock was released


def test_rows_outside_the_run_are_a_data_error(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    files, _ = finish(config, succeed=[(0, 0)], fail=[])
    with files.paths.output.open("ab") as out:
        out.write(orjson.dumps({"_ng_task_index": 9, "_ng_rollout_index": 0, "reward": 1.0}) + b"\n")
    with pytest.raises(DataError, match=r"out\.jsonl:2: .*outside this run's 3 tasks x 2 repeats"):
        finish(config, succeed=[], fail=[])


def test_summary_shows_table_failures_and_outcome(tmp_path: Path) -> None:
    _, result = finish(make_config(tmp_path), succeed=[(0, 0), (0, 1), (1, 0)], fail=[(1, 1), (2, 0), (2, 1)])
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(render_summary(result))
    text = out.getvalue()
    for fragment in (
        "pass@2",
        "mean@2",
        "a failures: timeout 3",
        "3 of 6 rollouts failed",
        "out_failures.jsonl",
    ):
        assert fragment in text


def test_summary_shows_the_token_drift_count(tmp_path: Path) -> None:
    _, result = finish(make_config(tmp_path), succeed=[(0, 0)], fail=[])
    result.metrics["agents"]["a"]["token_ids"] = {"rollouts": 200, "drifted": 113}
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(render_summary(result))
    assert "a token ids: 113 of 200 rollouts drifted (ng_check_tokens shows where)" in out.getvalue()
