"""The report's numbers agree with the collector's own metrics (they come from its Scoreboard)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.report.figures import RunInfo, compute_figures, task_columns
from ng_cli.report.rows import Problems, read_rows
from ng_cli.report.tally import Tally
from tests.fixtures.rollouts.rollout_rows import rollout_row, write_jsonl

# task -> rewards of its 4 repeats (None: that repeat failed)
REWARDS: dict[int, list[float | None]] = {
    0: [1.0, 1.0, 0.0, 1.0],
    1: [0.0, 0.0, 0.0, 1.0],
    2: [0.0, 0.0, 0.0, 0.0],
    3: [1.0, None, 0.0, 0.5],
}


@pytest.fixture
def tally(tmp_path: Path) -> Tally:
    rows = [
        rollout_row(
            task,
            repeat,
            reward,
            agent="a" if task < 2 else "b",
            status="incomplete" if task == 2 else "completed",
        )
        for task, rewards in REWARDS.items()
        for repeat, reward in enumerate(rewards)
        if reward is not None
    ]
    path = write_jsonl(tmp_path / "out.jsonl", rows)
    result = Tally()
    for row in read_rows(path, Problems(path)):
        result.add(row)
    result.add_failures(
        [{"_ng_task_index": 3, "_ng_rollout_index": 1, "agent": "b", "kind": "timeout", "input_line": 4}]
    )
    return result


def test_run_metrics_are_the_scoreboards(tally: Tally) -> None:
    figures = compute_figures(tally, RunInfo(num_repeats=4))
    assert figures.k == 4
    a, b = figures.agents["a"], figures.agents["b"]
    assert a["pass@4"] == 1.0
    assert a["mean@4"] == pytest.approx((0.75 + 0.25) / 2)
    assert b["pass@4"] == 0.0  # task 3 has a failed repeat: left out, as in _metrics.json
    assert b["tasks_incomplete"] == 1
    assert b["failures"] == {"timeout": 1}
    totals = figures.totals
    assert (totals["rollouts"], totals["failed"], totals["tasks"]) == (15, 1, 4)
    assert totals["context_overflows"] == 4  # task 2's incomplete responses, context_length_exceeded
    assert totals["output_tokens"] == 15 * 11


def test_pass_at_k_curve_uses_each_tasks_first_k_repeats(tally: Tally) -> None:
    svg = compute_figures(tally, RunInfo(num_repeats=4)).plots["passk"]
    # agent a: k=1 -> task 0 passes, task 1 not (0.5); k=2,3 -> 0.5; k=4 -> 1.0
    for k, value in [(1, 0.5), (2, 0.5), (3, 0.5), (4, 1.0)]:
        assert f"a k={k}: {value:.3f}" in svg


def test_every_plot_is_drawn_and_no_curve_without_repeats(tally: Tally) -> None:
    figures = compute_figures(tally, RunInfo(num_repeats=4))
    assert set(figures.plots) == {"reward", "length", "turns", "failures", "passk"}
    assert all('class="mark"' in svg for svg in figures.plots.values())
    single = Tally()
    assert "passk" not in compute_figures(single, RunInfo()).plots
    assert compute_figures(single, RunInfo()).plots["failures"] == '<p class="empty">No failed rollouts.</p>'


def test_task_columns(tally: Tally) -> None:
    columns = task_columns(tally, 4, None)
    assert columns["task"] == [0, 1, 2, 3]
    assert columns["n"] == [4, 4, 4, 3]
    assert columns["mean"] == [0.75, 0.25, 0.0, 0.5]
    assert columns["passing"] == [3, 1, 0, 2]
    assert columns["pass"] == [1, 1, 0, None]
    assert columns["failed"] == [0, 0, 0, 1]
    assert columns["prompt"][0] == "Weather in Paris?"
    assert task_columns(tally, 4, 0.9)["passing"] == [3, 1, 0, 1]
