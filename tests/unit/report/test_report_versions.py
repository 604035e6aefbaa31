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
