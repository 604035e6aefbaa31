"""Hand-made SVG charts: bars, stacked bars and lines, static and offline.

The report needs four kinds of simple chart; a plotting library would add either a large
dependency (matplotlib) or hundreds of kilobytes of inlined JavaScript per report (plotly.js,
Vega). These ~150 lines draw them as plain SVG that renders with scripts off, scales with the
page, and carries a `<title>` tooltip on every mark. Every mark has `class="mark"` so a test
can count what was drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "Bins", "bar_chart", "histogram", "line_chart", "stacked_bar_chart"]

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7")
_W, _H = 480, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 46, 10, 10, 46
_DISCRETE_LIMIT = 12

Bins = list[tuple[str, int]]


def histogram(values: Sequence[float], *, max_bins: int = 20) -> Bins:
    """(label, count) bins: one per value when there are few distinct values, else equal widths."""
    if not values:
        return []
    distinct = sorted(set(values))
    if len(distinct) <= _DISCRETE_LIMIT:
        counts = {value: 0 for value in distinct}
        for value in values:
            counts[value] += 1
        return [(_short(value), count) for value, count in counts.items()]
    low, high = distinct[0], distinct[-1]
    is_integer = all(float(v).is_integer() for v in distinct)
    bins = min(max_bins, int(high - low) + 1) if is_integer else max_bins
    width = (high - low) / bins
    counts_by_bin = [0] * bins
    for value in values:
        counts_by_bin[min(bins - 1, int((value - low) / width))] += 1
    return [
        (f"{_short(low + i * width)}–{_short(low + (i + 1) * width)}", n) for i, n in enumerate(counts_by_bin)
    ]


def bar_chart(bins: Bins, *, x_label: str, y_label: str = "rollouts", color: str = PALETTE[0]) -> str:
    """Vertical bars, one per bin."""
    return stacked_bar_chart(
        [label for label, _ in bins],
        {"": [n for _, n in bins]},
        x_label=x_label,
        y_label=y_label,
        colors=[color],
    )


def stacked_bar_chart(
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    x_label: str,
    y_label: str,
    colors: Sequence[str] = PALETTE,
) -> str:
    """Bars stacked by series (e.g. failures by class per stretch of the run)."""
    totals = [sum(values[i] for values in series.values()) for i in range(len(labels))]
    top = _nice_top(max(totals, default=0))
    width = (_W - _LEFT - _RIGHT) / max(1, len(labels))
    parts = _axes(top, x_label=x_label, y_label=y_label)
    for i, label in enumerate(labels):
        base = 0.0
        for (name, values), color in zip(series.items(), _cycle(colors, len(series)), strict=True):
            value = values[i]
            if value <= 0:
                continue
            y0, y1 = _y(base, top), _y(base + value, top)
            tip = f"{name + ': ' if name else ''}{_short(value)} ({label})"
            parts.append(
                f'<rect class="mark" x="{_LEFT + i * width + 1:.1f}" y="{y1:.1f}" width="{max(1.0, width - 2):.1f}" '
                f'height="{max(0.5, y0 - y1):.1f}" fill="{color}"><title>{escape(tip)}</title></rect>'
            )
            base += value
    parts.extend(_x_ticks(labels, width))
    return _svg(parts, _legend(list(series), colors) if len(series) > 1 else "")


def line_chart(
    xs: Sequence[int],
    series: Mapping[str, Sequence[float | None]],
    *,
    x_label: str,
    y_label: str,
    x_name: str = "k",
    counts: Mapping[str, Sequence[int]] | None = None,
) -> str:
    """Lines with a dot per point, y from 0 to 1 (pass@k, mean@k of rewards in [0, 1]) or the data's top.

    Each dot's tooltip reads `<series> <x_name>=<x>: <y>`, and `(<n> rollouts)` given `counts`."""
    values = [v for points in series.values() for v in points if v is not None]
    top = 1.0 if all(0 <= v <= 1 for v in values) else _nice_top(max(values, default=1.0))
    span = max(1, len(xs) - 1)
    step = (_W - _LEFT - _RIGHT - 20) / span
    parts = _axes(top, x_label=x_label, y_label=y_label)
    for (name, points), color in zip(series.items(), _cycle(PALETTE, len(series)), strict=True):
        numbers: Sequence[int | None] = (counts or {}).get(name) or [None] * len(xs)
        coords = [
            (_LEFT + 10 + i * step, _y(v, top), v, x, n)
            for i, (x, v, n) in enumerate(zip(xs, points, numbers, strict=True))
            if v is not None
        ]
        if len(coords) > 1:
            path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy, _, _, _ in coords)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for cx, cy, v, x, n in coords:
            note = "" if n is None else f" ({n} rollout{'' if n == 1 else 's'})"
            parts.append(
                f'<circle class="mark" cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{color}">'
                f"<title>{escape(name)} {escape(x_name)}={x}: {v:.3f}{note}</title></circle>"
            )
    parts.extend(_x_ticks([str(x) for x in xs], step, offset=_LEFT + 10 - step / 2))
    return _svg(parts, _legend(list(series), PALETTE))


def _axes(top: float, *, x_label: str, y_label: str) -> list[str]:
    bottom = _H - _BOTTOM
    parts = [
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{bottom}" class="axis"/>',
        f'<line x1="{_LEFT}" y1="{bottom}" x2="{_W - _RIGHT}" y2="{bottom}" class="axis"/>',
        f'<text x="{(_LEFT + _W) / 2}" y="{_H - 4}" text-anchor="middle" class="label">{escape(x_label)}</text>',
        f'<text x="12" y="{(_TOP + bottom) / 2}" text-anchor="middle" class="label" '
        f'transform="rotate(-90 12 {(_TOP + bottom) / 2})">{escape(y_label)}</text>',
    ]
    for i in range(5):
        value = top * i / 4
        y = _y(value, top)
        parts.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}" class="grid"/>')
        parts.append(
            f'<text x="{_LEFT - 4}" y="{y + 3:.1f}" text-anchor="end" class="tick">{_short(value)}</text>'
        )
    return parts


def _x_ticks(labels: Sequence[str], width: float, *, offset: float = _LEFT) -> list[str]:
    """A label under every bar, or under every n-th when they would overlap; a range shows its start."""
    shown = [label.split("–")[0] for label in labels]
    longest = max((len(label) for label in shown), default=1)
    every = max(1, math.ceil(len(shown) * longest * 6.5 / (_W - _LEFT - _RIGHT)))
    return [
        f'<text x="{offset + (i + 0.5) * width:.1f}" y="{_H - _BOTTOM + 14}" text-anchor="middle" '
        f'class="tick">{escape(label)}</text>'
        for i, label in enumerate(shown)
        if i % every == 0
    ]


def _legend(names: list[str], colors: Sequence[str]) -> str:
    items = "".join(
        f'<span><i style="background:{color}"></i>{escape(name)}</span>'
        for name, color in zip(names, _cycle(colors, len(names)), strict=True)
    )
    return f'<div class="legend">{items}</div>'


def _svg(parts: list[str], legend: str) -> str:
    body = "".join(parts)
    return f'<svg class="plot" viewBox="0 0 {_W} {_H}" role="img">{body}</svg>{legend}'


def _y(value: float, top: float) -> float:
    return _H - _BOTTOM - (value / top if top else 0) * (_H - _BOTTOM - _TOP)


def _nice_top(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^n at or above `value` (an axis that reads well)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value)


def _cycle(colors: Sequence[str], n: int) -> list[str]:
    return [colors[i % len(colors)] for i in range(n)]


def _short(value: float) -> str:
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3g}"
