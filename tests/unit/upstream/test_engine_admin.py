"""`upstream/engine_admin.py`'s readers of what workers answer: the expert check's summary."""

from __future__ import annotations

import json

import pytest

from ng_cli.upstream.engine_admin import PhaseError, expert_summary


def test_an_expert_check_summary_is_read_as_the_worker_wrote_it() -> None:
    written = {"checked": 16, "exact": 16, "ep_rank": 1, "held_ids": [8, 9], "unchecked": None}
    assert expert_summary("http://e:1", json.dumps(written)) == written


@pytest.mark.parametrize("answer", ["abc0123 shared=def4567", "[1, 2]", "", "null"])
def test_an_answer_that_is_not_a_summary_fails_verify_naming_the_engine(answer: str) -> None:
    """A fingerprint, a list, nothing: never read as a passed check."""
    with pytest.raises(PhaseError) as raised:
        expert_summary("http://e:1", answer)
    assert (raised.value.engine, raised.value.phase) == ("http://e:1", "verify")
    assert "not a JSON object" in raised.value.reason
