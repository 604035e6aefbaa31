"""What the quickstart's rollouts show, in a few lines: rewards, tool use, and what the model is.

The collector prints its own summary table; this adds what a newcomer asks next ("did the model
call the tool? where do the rewards come from?") from the output rows themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from rich.console import Group, RenderableType
from rich.text import Text

from ng_cli.errors import NgError
from ng_cli.report import write_report
from ng_cli.rollouts.resume import OutputPaths

__all__ = ["MODEL_NOTE", "RolloutStats", "rollout_report", "rollout_stats"]

MODEL_NOTE = (
    "The embedded model (models/tiny-weather) is a 3M-parameter Qwen2 trained offline on this one "
    "task and nothing else (its README.md says how): it calls get_weather with the asked city and "
    "reports the result, so rewards near 1.0 are expected here. They are real rewards: the "
    "environment's /verify judged each answer the model actually gave{tools}. For any other "
    "environment, point the same stack at a capable model (docs/quickstart.md)."
)


@dataclass(frozen=True)
class RolloutStats:
    """Counts over the rows of one output file."""

    rollouts: int
    mean_reward: float | None
    rewarded: int
    """Rollouts with reward > 0."""
    with_tool_calls: int
    tool_calls: int
    successful_tool_calls: int
    """Tool calls whose output is not an error (the model named a known city)."""
    incomplete: int
    output_tokens: int


def rollout_stats(rows: Iterable[Mapping[str, Any]]) -> RolloutStats:
    """Tally rewards, tool calls and incomplete responses over output rows."""
    rewards: list[float] = []
    with_calls = calls = successful = incomplete = tokens = 0
    for row in rows:
        rewards.append(float(row["reward"]))
        response = row.get("response") or {}
        output = response.get("output") or []
        row_calls = sum(1 for item in output if item.get("type") == "function_call")
        calls += row_calls
        with_calls += row_calls > 0
        successful += sum(1 for item in output if _is_successful_tool_output(item))
        incomplete += response.get("status") == "incomplete"
        tokens += int((response.get("usage") or {}).get("output_tokens") or 0)
    return RolloutStats(
        rollouts=len(rewards),
        mean_reward=sum(rewards) / len(rewards) if rewards else None,
        rewarded=sum(1 for reward in rewards if reward > 0),
        with_tool_calls=with_calls,
        tool_calls=calls,
        successful_tool_calls=successful,
        incomplete=incomplete,
        output_tokens=tokens,
    )


def rollout_report(output: Path) -> RenderableType:
    """The lines printed after the collector's own summary."""
    stats = rollout_stats(orjson.loads(line) for line in output.read_bytes().splitlines() if line.strip())
    paths = OutputPaths.for_output(output)
    mean = "-" if stats.mean_reward is None else f"{stats.mean_reward:.3f}"
    lines = [
        f"rollouts:   {stats.rollouts} in {output}",
        f"metrics:    {paths.metrics}",
        f"reward:     mean {mean}, {stats.rewarded} of {stats.rollouts} rollouts above 0",
        f"tool use:   {stats.with_tool_calls} rollouts called a tool ({stats.tool_calls} calls, "
        f"{stats.successful_tool_calls} answered without an error)",
        f"responses:  {stats.incomplete} stopped at max_output_tokens or the context limit; "
        f"{stats.output_tokens} tokens generated",
    ]
    lines.append(_html_report_line(output))
    tools = ", and its tool calls really ran against the environment" if stats.tool_calls else ""
    return Group(Text("\n".join(lines)), Text(MODEL_NOTE.format(tools=tools), style="yellow"))


def _html_report_line(output: Path) -> str:
    """Write the HTML report (ng_report) and name it; a failure to write it is said, not raised."""
    try:
        result = write_report(output)
    except NgError as exc:
        return f"report:     not written ({exc.message})"
    skipped = f"; {result.problems.count} lines could not be read" if result.problems.count else ""
    return f"report:     {result.path}  (open it in a browser: plots, tasks, every conversation{skipped})"


def _is_successful_tool_output(item: Mapping[str, Any]) -> bool:
    if item.get("type") != "function_call_output":
        return False
    try:
        value = orjson.loads(item.get("output") or "null")
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict) and "error" not in value
