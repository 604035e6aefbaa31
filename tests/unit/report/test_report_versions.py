"""The report says which weights made the rollouts, as the collector's summary does."""

from __future__ import annotations

from pathlib import Path

from ng_cli.report import write_report
from ng_cli.rollouts.results import to_output_line
from tests.unit.rollouts.test_row_versions import response


def test_the_report_counts_rollouts_by_weight_version(tmp_path: Path) -> None:
    rollouts = tmp_path / "out.jsonl"
    lines = [
        to_output_line(
            {"responses_create_params": {"input": "hi"}},
            {"reward": 1.0, "response": response(*stamps)},
            task_index=task,
            rollout_index=0,
        )[0]
        for task, stamps in enumerate([((0, 0),), ((0, 1), (1, 1)), ((1, 1),)])
    ]
    rollouts.write_bytes(b"".join(lines))
    result = write_report(rollouts)
    page = result.path.read_text()
    assert "weights: rollouts by start version 0: 2, 1: 1; newest 1; 1 span an update" in page


def _rows_by_version(path: Path, rewards: dict[int, list[float]]) -> Path:
    """Each version's rollouts, in version order (a training run's steps in one file)."""
    lines = []
    for version, version_rewards in rewards.items():
        for reward in version_rewards:
            lines.append(
                to_output_line(
                    {"responses_create_params": {"input": "hi"}},
                    {"reward": reward, "response": response((version, version))},
                    task_index=len(lines),
                    rollout_index=0,
                )[0]
            )
    path.write_bytes(b"".join(lines))
    return path


def test_the_report_plots_mean_reward_by_weight_version(tmp_path: Path) -> None:
    rollouts = _rows_by_version(
        tmp_path / "out.jsonl", {1004: [0.0, 0.0, 1.0], 1005: [1.0, 0.0], 1006: [1.0, 1.0]}
    )
    page = write_report(rollouts).path.read_text()
    plot = page.split('<div id="plot-versions">')[1].split("</figure>")[0]
    assert "Mean reward by weight version" in page
    assert plot.count('class="mark"') == 3
    assert "version=1004: 0.333 (3 rollouts)" in plot
    assert "version=1005: 0.500 (2 rollouts)" in plot
    assert "version=1006: 1.000 (2 rollouts)" in plot


def test_one_weight_version_draws_no_curve(tmp_path: Path) -> None:
    rollouts = _rows_by_version(tmp_path / "out.jsonl", {3: [0.0, 1.0]})
    assert 'id="plot-versions"' not in write_report(rollouts).path.read_text()
