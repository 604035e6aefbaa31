"""The quickstart's closing report: counts from output rows, and the honest note."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from ng_cli.quickstart.report import rollout_report, rollout_stats


def call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": "{}"}


def result(call_id: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": json.dumps(value)}


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


ROWS = [
    {
        "reward": 0.0,
        "response": {"status": "completed", "output": [message("hi")], "usage": {"output_tokens": 3}},
    },
    {
        "reward": 1.0,
        "response": {
            "status": "completed",
            "output": [
                call("a"),
                call("b"),
                result("a", {"city": "Paris"}),
                result("b", {"error": "no"}),
                message("ok"),
            ],
            "usage": {"output_tokens": 10},
        },
    },
    {
        "reward": 0.0,
        "response": {"status": "incomplete", "output": [message("...")], "usage": {"output_tokens": 7}},
    },
]


def test_stats_count_rewards_tool_calls_and_incomplete_answers() -> None:
    stats = rollout_stats(ROWS)
    assert stats.rollouts == 3
    assert stats.mean_reward == 1 / 3
    assert stats.rewarded == 1
    assert (stats.with_tool_calls, stats.tool_calls, stats.successful_tool_calls) == (1, 2, 1)
    assert stats.incomplete == 1
    assert stats.output_tokens == 20


def test_stats_of_nothing_have_no_mean() -> None:
    assert rollout_stats([]).mean_reward is None


def render(output: Path) -> str:
    console = Console(file=io.StringIO(), width=1000)
    console.print(rollout_report(output))
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_report_names_the_files_and_says_what_the_model_is(tmp_path: Path) -> None:
    output = tmp_path / "rollouts.jsonl"
    rows = [{**row, "_ng_task_index": i, "_ng_rollout_index": 0} for i, row in enumerate(ROWS)]
    output.write_text("".join(json.dumps(row) + "\n" for row in rows))
    text = render(output)
    assert f"3 in {output}" in text
    assert str(tmp_path / "rollouts_metrics.json") in text
    assert f"report:     {tmp_path / 'rollouts_report.html'}  (open it in a browser" in text
    assert (tmp_path / "rollouts_report.html").stat().st_size > 0
    assert "mean 0.333, 1 of 3 rollouts above 0" in text
    assert "trained offline" in text
    assert "its tool calls really ran" in text


def test_the_html_report_line_says_what_it_could_not_read(tmp_path: Path) -> None:
    output = tmp_path / "rollouts.jsonl"
    output.write_text(json.dumps(ROWS[0]) + "\n")  # no _ng_task_index: not a collector row
    assert "1 lines could not be read" in render(output)


def test_report_does_not_claim_tool_calls_that_did_not_happen(tmp_path: Path) -> None:
    output = tmp_path / "rollouts.jsonl"
    output.write_text(json.dumps(ROWS[0]) + "\n")
    assert "tool calls really ran" not in render(output)
