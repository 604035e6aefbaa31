"""The weight versions of one rollout, from the stamps its model calls carry.

vllm_model stamps each call's last output item with `weight_version: {start, end, call}` (the
versions at dispatch and at completion, `upstream/versions.py`); the agent's trajectory keeps the
items, so a finished rollout knows which weights made each of its turns. The row gets

    weight_version: {"start": oldest start, "end": newest end, "calls": [each call's stamp],
                     "staleness": end - start, "stale": true (only past +max_staleness)}

Staleness is a version difference, newest minus oldest, not a count of updates: versions are the
numbers the trainer gives its updates (`ng_update_weights +version`, its step number), so a rollout
whose calls ran under 1004, 1010 and 1011 has staleness 7, though it saw two updates. 0 means every
token came from one version (on-policy for that version). Past `+max_staleness=K` (a difference
above K) a row is flagged `stale`, not dropped: it is written and counted, and the trainer (which
decides how off-policy it may be) filters or weights it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["VersionTally", "describe_versions", "row_versions"]


def row_versions(response: Any, *, max_staleness: int | None = None) -> dict[str, Any] | None:
    """The rollout's versions from its response's output items; None when no call was stamped."""
    output = response.get("output") if isinstance(response, Mapping) else None
    calls = [
        item["weight_version"]
        for item in output or ()
        if isinstance(item, Mapping) and _is_stamp(item.get("weight_version"))
    ]
    if not calls:
        return None
    start = min(call["start"] for call in calls)
    end = max(call["end"] for call in calls)
    versions: dict[str, Any] = {"start": start, "end": end, "staleness": end - start, "calls": calls}
    if max_staleness is not None and end - start > max_staleness:
        versions["stale"] = True
    return versions


def _is_stamp(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(value.get(key), int) and not isinstance(value.get(key), bool) for key in ("start", "end")
    )


@dataclass
class VersionTally:
    """Versions over a collection: for the summary, `_metrics.json` and the report."""

    by_start: Counter[int] = field(default_factory=Counter)
    spanning: int = 0
    stale: int = 0
    max_staleness_seen: int = 0
    newest: int | None = None

    def add(self, versions: Mapping[str, Any] | None) -> None:
        if versions is None:
            return
        start, end = int(versions["start"]), int(versions["end"])
        self.by_start[start] += 1
        self.spanning += start != end
        self.stale += bool(versions.get("stale"))
        self.max_staleness_seen = max(self.max_staleness_seen, end - start)
        self.newest = end if self.newest is None else max(self.newest, end)

    def as_dict(self, *, max_staleness: int | None) -> dict[str, Any] | None:
        if not self.by_start:
            return None
        return {
            "rollouts_by_start_version": {
                str(version): count for version, count in sorted(self.by_start.items())
            },
            "newest_version": self.newest,
            "spanning_an_update": self.spanning,
            "max_staleness_seen": self.max_staleness_seen,
            "max_staleness": max_staleness,
            "stale": self.stale,
        }


def describe_versions(versions: Mapping[str, Any] | None) -> str | None:
    """`weights: rollouts by start version 0: 120, 1: 80; newest 1; 14 span an update (largest ...)`."""
    if not versions:
        return None
    by_start = ", ".join(
        f"{version}: {count}" for version, count in versions["rollouts_by_start_version"].items()
    )
    text = (
        f"weights: rollouts by start version {by_start}; newest {versions['newest_version']}; "
        f"{versions['spanning_an_update']} span an update "
        f"(largest version difference in a rollout (newest - oldest): {versions['max_staleness_seen']})"
    )
    if versions.get("max_staleness") is not None or versions.get("stale"):
        limit = versions.get("max_staleness")
        text += f"; {versions['stale']} stale" + (f" (max_staleness {limit})" if limit is not None else "")
    return text
