"""A rollout row's weight versions, from the stamps its calls carry."""

from __future__ import annotations

from typing import Any

import orjson

from ng_cli.rollouts.results import to_output_line
from ng_cli.rollouts.versions import VersionTally, describe_versions, row_versions


def response(*stamps: tuple[int, int]) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    for index, (start, end) in enumerate(stamps):
        output.append({"type": "function_call", "call_id": f"c{index}"})
        output[-1]["weight_version"] = {"start": start, "end": end, "call": f"m-{index}"}
        output.append({"type": "function_call_output", "call_id": f"c{index}", "output": "{}"})
    return {"output": output}


def test_the_row_spans_from_the_oldest_start_to_the_newest_end() -> None:
    versions = row_versions(response((2, 2), (2, 3), (3, 3)))
    assert versions is not None
    assert (versions["start"], versions["end"], versions["staleness"]) == (2, 3, 1)
    assert [call["call"] for call in versions["calls"]] == ["m-0", "m-1", "m-2"]
    assert "stale" not in versions


def test_max_staleness_flags_without_dropping() -> None:
    flagged = row_versions(response((1, 3)), max_staleness=1)
    kept = row_versions(response((1, 2)), max_staleness=1)
    assert flagged is not None
    assert flagged["stale"] is True
    assert kept is not None
    assert "stale" not in kept


def test_unstamped_rollouts_have_no_versions() -> None:
    assert row_versions({"output": [{"type": "message"}]}) is None
    assert row_versions(None) is None


def test_the_output_line_and_the_tally_carry_them() -> None:
    line, outcome = to_output_line(
        {"id": 1},
        {"reward": 1.0, "response": response((0, 1))},
        task_index=0,
        rollout_index=0,
        max_staleness=0,
    )
    row = orjson.loads(line)
    assert row["weight_version"]["stale"] is True
    tally = VersionTally()
    tally.add(outcome.weight_version)
    tally.add(row_versions(response((1, 1))))
    summary = tally.as_dict(max_staleness=0)
    assert summary == {
        "rollouts_by_start_version": {"0": 1, "1": 1},
        "newest_version": 1,
        "spanning_an_update": 1,
        "max_staleness_seen": 1,
        "max_staleness": 0,
        "stale": 1,
    }


def test_staleness_is_the_version_difference_and_is_printed_as_one() -> None:
    """Versions are the trainer's numbers, not a count of updates: 1004 -> 1010 -> 1011 is 7 apart
    though the rollout saw two updates. The value, its name in the summary and the flag agree."""
    versions = row_versions(response((1004, 1010), (1010, 1011)), max_staleness=6)
    assert versions is not None
    assert versions["staleness"] == 7
    assert versions["stale"] is True
    tally = VersionTally()
    tally.add(versions)
    text = describe_versions(tally.as_dict(max_staleness=6))
    assert text is not None
    assert "largest version difference in a rollout (newest - oldest): 7" in text
    assert "lived through" not in text
