"""A training run's learning curve in the report, in a real browser: mean reward by weight version.

The rows are what a collector writes when the model server stamps every call with its weight
version (`rollouts.results.to_output_line`): three versions of two agents, rewards rising, and
one rollout that spans an update (it counts at its start version). Headless Chromium from the OS
packages opens the report with the network cut off, and the plot's dots are read back: one per
agent and version, their tooltips the means and the rollout counts.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from ng_cli.report import write_report
from ng_cli.rollouts.results import to_output_line
from tests.fixtures.browser import chromium_page, require_browser
from tests.unit.rollouts.test_row_versions import response

pytestmark = [pytest.mark.integration]

# (agent, calls' (start, end) versions, reward)
ROWS = [
    ("weather", ((7, 7),), 0.0),
    ("weather", ((7, 7),), 0.0),
    ("weather", ((7, 7), (7, 8)), 1.0),  # spans the update to 8: counts at 7
    ("weather", ((8, 8),), 1.0),
    ("weather", ((8, 8),), 0.0),
    ("weather", ((9, 9),), 1.0),
    ("other", ((7, 7),), 0.0),
    ("other", ((9, 9),), 1.0),
]


def test_reward_by_weight_version_in_chromium(tmp_path: Path) -> None:
    chromium = require_browser()
    rollouts = tmp_path / "run.jsonl"
    lines = []
    for task, (agent, stamps, reward) in enumerate(ROWS):
        line, _ = to_output_line(
            {"responses_create_params": {"input": "hi"}, "agent_ref": {"name": agent}},
            {"reward": reward, "response": response(*stamps)},
            task_index=task,
            rollout_index=0,
        )
        lines.append(line)
    rollouts.write_bytes(b"".join(lines))
    assert [orjson.loads(line)["weight_version"]["start"] for line in lines] == [7, 7, 7, 8, 8, 9, 7, 9]
    report = write_report(rollouts).path

    with chromium_page(chromium) as page:
        page.route(re.compile(r"^https?://"), lambda route: route.abort())
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=30_000)
        plot = page.locator("#plot-versions")
        assert plot.locator("h3").inner_text() == "Mean reward by weight version"
        marks = plot.locator("svg.plot .mark")
        assert marks.count() == 5  # weather at 7, 8, 9; other at 7 and 9 (none at 8: a gap)
        titles = sorted(marks.nth(i).locator("title").text_content() or "" for i in range(marks.count()))
        assert titles == [
            "other version=7: 0.000 (1 rollout)",
            "other version=9: 1.000 (1 rollout)",
            "weather version=7: 0.333 (3 rollouts)",
            "weather version=8: 0.500 (2 rollouts)",
            "weather version=9: 1.000 (1 rollout)",
        ]
        assert plot.locator("svg.plot polyline").count() == 2
        assert plot.locator(".legend").inner_text().split() == ["weather", "other"]
        assert plot.is_visible()
