"""The report's HTML around the data: header, notes, metrics, plots, and the browser's shell.

Everything is inlined (styles, script, SVG); nothing is fetched at view time. Values that come
from the data are escaped here, for HTML text and for the JSON data blocks (`script_json`); the
script sets its texts with `textContent`.
"""

from __future__ import annotations

from html import escape
from importlib import resources
from typing import Any

import orjson

from ng_cli.report.figures import Figures
from ng_cli.rollouts.versions import describe_versions

__all__ = ["page_end", "page_start", "script_json"]

_PLOTS = (
    ("reward", "Reward distribution per agent"),
    ("passk", "pass@k and mean@k (each task's first k repeats)"),
    ("versions", "Mean reward by weight version"),
    ("length", "Response length"),
    ("turns", "Model turns per rollout"),
    ("failures", "Failures by class along the run"),
)


def _asset(name: str) -> str:
    return resources.files("ng_cli.report").joinpath("assets", name).read_text(encoding="utf-8")


def page_start(*, source: str, figures: Figures, notes: list[str], threshold: float | None) -> str:
    """Everything before the inline data: a complete, readable page even with scripts off."""
    rule = "reward > 0" if threshold is None else f"reward ≥ {threshold:g}"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Rollout report: {escape(source)}</title><style>{_asset('report.css')}</style></head><body>"
        f'<header><h1>Rollout report</h1><div class="sub">{escape(source)} · k = {figures.k} · '
        f"a rollout passes when {rule}</div></header><main>"
        + _notes(notes)
        + _metrics(figures)
        + _plots(figures)
        + _browser_shell(figures.k)
    )


def page_end() -> str:
    """The script, after the data blocks."""
    return f"</main><script>{_asset('report.js')}</script></body></html>\n"


def script_json(data: Any) -> bytes:
    """`data` as JSON that HTML reads as plain text inside `<script type="application/json">`.

    HTML's script-data states end the block at `</script`, and after `<!--` a `<script` makes
    the parser skip the block's own `</script>`, so the rest of the page, the page's script too,
    becomes script text (a prompt holding `<!--<script` left every table empty). JSON has `<` only
    inside strings, where `\\u003c` reads back as `<`; with no `<` none of the three can occur.
    """
    return orjson.dumps(data).replace(b"<", b"\\u003c")


def _notes(notes: list[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<pre>{escape(note)}</pre>" for note in notes)
    return f'<section class="notes" id="notes"><h2>Read with problems</h2>{items}</section>'


def _metrics(figures: Figures) -> str:
    totals = figures.totals
    cards = [
        ("rollouts", totals["rollouts"]),
        ("tasks", totals["tasks"]),
        ("failed rollouts", totals["failed"]),
        ("context overflows", totals["context_overflows"]),
        ("incomplete responses", sum(totals["incomplete"].values())),
        ("output tokens", totals["output_tokens"]),
        ("mean reward", totals["mean_reward"]),
        ("rollouts/s (last run)", totals["rollouts_per_s"]),
    ]
    card_html = "".join(
        f'<div class="card"><b>{_number(v)}</b><span>{escape(k)}</span></div>' for k, v in cards
    )
    breakdown = []
    if totals["failures"]:
        breakdown.append("failures by class: " + _counts(totals["failures"]))
    if totals["incomplete"]:
        breakdown.append("incomplete responses by reason: " + _counts(totals["incomplete"]))
    versions = describe_versions(totals.get("weight_versions"))
    if versions is not None:
        breakdown.append(versions)
    lines = "".join(f"<p>{escape(line)}</p>" for line in breakdown)
    return f'<section id="metrics"><h2>Run</h2><div class="cards">{card_html}</div>{lines}{_agent_table(figures)}</section>'


def _agent_table(figures: Figures) -> str:
    k = figures.k
    headers = ["agent", "rollouts", "failed", "mean reward", "pass@1"]
    headers += [f"pass@{k}", f"mean@{k}", "tasks complete"] if k > 1 else []
    headers += ["incomplete", "output tokens"]
    rows = []
    for agent, m in figures.agents.items():
        cells: list[Any] = [m["rollouts"], m["failed"], m["mean_reward"], m["pass@1"]]
        cells += [m[f"pass@{k}"], m[f"mean@{k}"], m["tasks_complete"]] if k > 1 else []
        cells += [sum(m["incomplete"].values()), m["output_tokens"]]
        rows.append(
            f"<tr><td>{escape(agent)}</td>" + "".join(f"<td>{_number(c)}</td>" for c in cells) + "</tr>"
        )
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f'<table id="agents"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _plots(figures: Figures) -> str:
    blocks = [
        f'<div id="plot-{key}"><h3>{escape(title)}</h3>{figures.plots[key]}</div>'
        for key, title in _PLOTS
        if key in figures.plots
    ]
    return f'<section id="plots"><h2>Plots</h2><div class="plots">{"".join(blocks)}</div></section>'


def _browser_shell(k: int) -> str:
    return (
        '<section id="task-section"><h2>Tasks</h2><div class="controls">'
        '<input id="filter" type="search" placeholder="filter: prompt text, agent, or task index">'
        '<select id="mode"><option value="all">all tasks</option>'
        '<option value="failed">with failed rollouts</option>'
        f'<option value="unsolved">pass@{k} = no</option>'
        '<option value="incomplete">not all repeats scored</option></select>'
        '<button id="prev">‹ prev</button><button id="next">next ›</button><span id="page"></span></div>'
        '<table id="tasks"><thead><tr></tr></thead><tbody></tbody></table></section>'
        '<section id="browser"><h2 id="browser-title">Rollout: pick a task above</h2>'
        '<div class="controls" id="repeats"></div><div id="conversation"></div></section>'
    )


def _number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return escape(str(value))


def _counts(by_kind: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in by_kind.items())
