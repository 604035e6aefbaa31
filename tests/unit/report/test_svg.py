"""The hand-made charts: bins that fit the data, one mark per drawn value, escaped labels."""

from __future__ import annotations

import re

from ng_cli.report.svg import bar_chart, histogram, line_chart, stacked_bar_chart


def marks(svg: str) -> int:
    return len(re.findall(r'class="mark"', svg))


def test_few_distinct_values_get_a_bar_each() -> None:
    assert histogram([0.0, 1.0, 1.0, 0.5]) == [("0", 1), ("0.5", 1), ("1", 2)]
    assert histogram([]) == []


def test_many_values_are_binned_in_equal_widths_covering_all() -> None:
    values = [float(v) for v in range(100)]
    bins = histogram(values, max_bins=10)
    assert len(bins) == 10
    assert sum(n for _, n in bins) == 100
    assert bins[0][0] == "0–9.9"
    assert bins[-1][1] == 10


def test_integer_data_never_gets_more_bins_than_integers() -> None:
    bins = histogram([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] * 2, max_bins=20)
    assert len(bins) == 15


def test_bars_draw_one_mark_per_non_empty_bin() -> None:
    svg = bar_chart([("a", 3), ("b", 0), ("c", 1)], x_label="reward")
    assert marks(svg) == 2
    assert svg.startswith('<svg class="plot"')


def test_stacked_bars_and_lines_escape_names_and_have_a_legend() -> None:
    svg = stacked_bar_chart(["0", "1"], {"<b>x</b>": [1, 0], "y": [2, 3]}, x_label="task", y_label="share")
    assert marks(svg) == 3
    assert "<b>x</b>" not in svg
    assert "&lt;b&gt;x&lt;/b&gt;" in svg
    lines = line_chart([1, 2, 3], {"agent": [0.2, None, 0.9]}, x_label="k", y_label="pass@k")
    assert marks(lines) == 2
    assert "agent k=3: 0.900" in lines
    assert 'class="legend"' in lines
