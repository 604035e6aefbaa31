"""Per-dataset statistics of rows, streamed: examples, tools, words, turns, temperature.

Each quantity keeps a Counter of its values, not the values: they are small integers (or a
few distinct temperatures), so memory stays bounded however many rows pass, and the median
and standard deviation are still exact.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DatasetMetrics", "Distribution"]


@dataclass
class Distribution:
    """Exact summary statistics of many numbers with few distinct values."""

    counts: Counter[float] = field(default_factory=Counter)

    def add(self, value: float) -> None:
        self.counts[value] += 1

    def merge(self, other: Distribution) -> None:
        self.counts.update(other.counts)

    def summary(self) -> dict[str, float | int | None]:
        """count, avg, min, max, median, std (population); None where there are no values."""
        count = sum(self.counts.values())
        if count == 0:
            return {"count": 0, "avg": None, "min": None, "max": None, "median": None, "std": None}
        mean = sum(value * n for value, n in self.counts.items()) / count
        variance = sum(n * (value - mean) ** 2 for value, n in self.counts.items()) / count
        return {
            "count": count,
            "avg": mean,
            "min": min(self.counts),
            "max": max(self.counts),
            "median": _median(sorted(self.counts.items()), count),
            "std": math.sqrt(variance),
        }


def _median(items: list[tuple[float, int]], count: int) -> float:
    """The median of the multiset given as sorted (value, multiplicity) pairs."""
    wanted = (count - 1) // 2, count // 2
    found: list[float] = []
    seen = 0
    for value, n in items:
        while len(found) < 2 and seen + n > wanted[len(found)]:
            found.append(value)
        seen += n
        if len(found) == 2:
            break
    return (found[0] + found[1]) / 2


@dataclass
class DatasetMetrics:
    """What `<split>_metrics.json` reports for one dataset (and, merged, for the split)."""

    examples: int = 0
    tools: Distribution = field(default_factory=Distribution)
    """Tools offered per row."""
    words: Distribution = field(default_factory=Distribution)
    """Whitespace-separated words of the JSON of `responses_create_params` (a proxy for tokens)."""
    turns: Distribution = field(default_factory=Distribution)
    """User messages in the row's input (a plain string input is one)."""
    temperature: Distribution = field(default_factory=Distribution)
    """`responses_create_params.temperature`, over the rows that set it."""

    def add(self, row: dict[str, Any]) -> None:
        params = row["responses_create_params"]
        self.examples += 1
        tools = params.get("tools")
        self.tools.add(len(tools) if isinstance(tools, list) else 0)
        self.words.add(len(json.dumps(params).split()))
        self.turns.add(_user_turns(params.get("input")))
        temperature = params.get("temperature")
        if isinstance(temperature, int | float) and not isinstance(temperature, bool):
            self.temperature.add(float(temperature))

    @classmethod
    def merged(cls, parts: Iterable[DatasetMetrics]) -> DatasetMetrics:
        total = cls()
        for part in parts:
            total.examples += part.examples
            for name in ("tools", "words", "turns", "temperature"):
                getattr(total, name).merge(getattr(part, name))
        return total

    def summary(self) -> dict[str, Any]:
        return {
            "examples": self.examples,
            "tools": self.tools.summary(),
            "words": self.words.summary(),
            "turns": self.turns.summary(),
            "temperature": self.temperature.summary(),
        }


def _user_turns(value: Any) -> int:
    if isinstance(value, str):
        return 1
    if not isinstance(value, list):
        return 0
    return sum(1 for item in value if isinstance(item, dict) and item.get("role") == "user")
