"""Streamed dataset metrics: exact against the statistics module, whatever the order of values."""

from __future__ import annotations

import random
import statistics

import pytest

from ng_cli.datasets.metrics import DatasetMetrics, Distribution


@pytest.mark.parametrize("size", [1, 2, 3, 10, 101, 1000])
def test_distribution_matches_the_statistics_module(size: int) -> None:
    rng = random.Random(size)
    values = [rng.choice([0, 1, 1, 2, 5, 9, 40]) for _ in range(size)]
    dist = Distribution()
    for value in values:
        dist.add(value)
    summary = dist.summary()
    assert summary["count"] == size
    assert summary["avg"] == pytest.approx(statistics.fmean(values))
    assert summary["median"] == statistics.median(values)
    assert summary["std"] == pytest.approx(statistics.pstdev(values))
    assert (summary["min"], summary["max"]) == (min(values), max(values))


def test_an_empty_distribution_has_no_statistics() -> None:
    assert Distribution().summary() == dict.fromkeys(("avg", "min", "max", "median", "std"), None) | {
        "count": 0
    }


def test_row_metrics_count_tools_user_turns_words_and_temperature() -> None:
    metrics = DatasetMetrics()
    metrics.add({"responses_create_params": {"input": "hello there", "temperature": 0.5}})
    metrics.add(
        {
            "responses_create_params": {
                "input": [
                    {"role": "system", "content": "s"},
                    {"role": "user", "content": "a"},
                    {"role": "user", "content": "b"},
                ],
                "tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "g"}],
            }
        }
    )
    summary = metrics.summary()
    assert summary["examples"] == 2
    assert (summary["tools"]["min"], summary["tools"]["max"]) == (0, 2)
    assert (summary["turns"]["min"], summary["turns"]["max"]) == (1, 2)
    assert summary["temperature"]["count"] == 1
    assert summary["temperature"]["avg"] == 0.5
    assert summary["words"]["min"] >= 3


def test_merged_metrics_equal_metrics_of_all_rows() -> None:
    rows = [{"responses_create_params": {"input": "w " * n, "temperature": n / 10}} for n in range(1, 8)]
    whole, first, second = DatasetMetrics(), DatasetMetrics(), DatasetMetrics()
    for i, row in enumerate(rows):
        whole.add(row)
        (first if i < 3 else second).add(row)
    assert DatasetMetrics.merged([first, second]).summary() == whole.summary()
