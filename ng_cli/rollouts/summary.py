"""The end-of-run report: a table per agent, and the sentence that says how the run ended."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ng_cli.rollouts.run import CollectResult
from ng_cli.rollouts.versions import describe_versions

__all__ = ["render_summary", "weight_versions_line"]


def render_summary(result: CollectResult) -> RenderableType:
    """Notes, the per-agent table, failures and incomplete responses, the files, the outcome."""
    parts: list[RenderableType] = [Text(f"note: {note}", style="yellow") for note in result.notes]
    parts.append(_agent_table(result.metrics))
    parts.extend(_breakdowns(result.metrics))
    versions = weight_versions_line(result.metrics.get("weight_versions"))
    if versions is not None:
        parts.append(versions)
    parts.append(_files(result))
    parts.append(_outcome(result))
    return Group(*parts)


def _agent_table(metrics: dict[str, Any]) -> Table:
    k = metrics["num_repeats"]
    headers = ["agent", "rollouts", "failed", "reward", "pass@1"]
    if k > 1:
        headers += [f"pass@{k}", f"mean@{k}"]
    headers.append("incomplete")
    table = Table(title="rollouts by agent", title_justify="left")
    for header in headers:
        table.add_column(header, justify="left" if header == "agent" else "right")
    for agent, numbers in metrics["agents"].items():
        row = [agent, str(numbers["rollouts"]), str(numbers["failed"])]
        row += [_number(numbers["mean_reward"]), _number(numbers["pass@1"])]
        if k > 1:
            row += [_number(numbers[f"pass@{k}"]), _number(numbers[f"mean@{k}"])]
        row.append(str(sum(numbers["incomplete"].values())))
        table.add_row(*row)
    return table


def _breakdowns(metrics: dict[str, Any]) -> list[Text]:
    """One line per agent with failures by class and incomplete responses by reason."""
    lines = []
    for agent, numbers in metrics["agents"].items():
        if numbers["failures"]:
            lines.append(Text(f"{agent} failures: {_counts(numbers['failures'])}", style="yellow"))
        if numbers["incomplete"]:
            lines.append(Text(f"{agent} incomplete responses: {_counts(numbers['incomplete'])}"))
        tokens = numbers.get("token_ids")
        if tokens:
            drifted, total = tokens["drifted"], tokens["rollouts"]
            text = f"{agent} token ids: {drifted} of {total} rollouts drifted"
            lines.append(
                Text(
                    text + (" (ng_check_tokens shows where)" if drifted else ""),
                    style="yellow" if drifted else "",
                )
            )
    return lines


def weight_versions_line(versions: dict[str, Any] | None) -> Text | None:
    """The run's weight versions in one line (`rollouts.versions.describe_versions`)."""
    text = describe_versions(versions)
    if text is None:
        return None
    return Text(text, style="yellow" if versions and versions.get("stale") else "")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _counts(by_kind: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(by_kind.items()))


def _files(result: CollectResult) -> Text:
    run = result.metrics["run"]
    lines = [
        f"output:   {result.paths.output}  ({result.succeeded} rows, {run['resumed_rollouts']} from an earlier run)",
        f"metrics:  {result.paths.metrics}",
    ]
    if result.failed:
        lines.append(f"failures: {result.paths.failures}")
    retried_earlier = run["retried_earlier_failures"]
    lines.append(
        f"this run: {run['succeeded']} rollouts in {run['elapsed_s']:.1f} s ({run['rollouts_per_s']:.1f}/s, "
        f"{run['output_tokens_per_s']:.0f} tok/s), {_retries(run)}"
        + (f", {retried_earlier} earlier failures run again" if retried_earlier else "")
    )
    return Text("\n".join(lines))


def _retries(run: dict[str, Any]) -> str:
    """`3 needed a retry (1 then succeeded)`: a rollout tried 3 times and failed counts too."""
    retried = run["retried_rollouts"]
    if not retried:
        return "0 needed a retry"
    return f"{retried} needed a retry ({run.get('recovered_rollouts', 0)} then succeeded)"


def _outcome(result: CollectResult) -> Text:
    if result.failed == 0:
        return Text(f"done: all {result.total} rollouts have a reward", style="bold green")
    return Text(
        f"run complete, but {result.failed} of {result.total} rollouts failed after retries; "
        f"see {result.paths.failures}. Run the same command again to retry only those.",
        style="bold yellow",
    )
