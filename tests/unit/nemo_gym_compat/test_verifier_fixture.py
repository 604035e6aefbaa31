"""`exercise_verifier_fixture`: a server's verify cases run in-process, as NeMo Gym's tests call it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ng_cli.nemo_gym_compat.api.verifier_fixture import (
    VerifierFixture,
    VerifierFixtureError,
    exercise_verifier_fixture,
)


class _Request(BaseModel):
    answer: str


class _Server:
    """Reward 1 for the answer "yes", 0 otherwise; an empty answer is an error."""

    async def verify(self, request: _Request) -> dict[str, Any]:
        if not request.answer:
            raise ValueError("empty answer")
        return {"reward": 1.0 if request.answer == "yes" else 0.0}


def _cases(tmp_path: Path, *lines: dict[str, Any]) -> Path:
    path = tmp_path / "verifier_cases.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


FULL = {"name": "right", "kind": "full_reward", "request": {"answer": "yes"}, "expected_reward": 1.0}
ZERO = {"name": "wrong", "kind": "zero_reward", "request": {"answer": "no"}, "expected_reward": 0.0}
BAD = {"name": "empty", "kind": "malformed", "request": {"answer": ""}, "expected_error": "empty answer"}


def _run(path: Path, **options: Any) -> Any:
    fixture = VerifierFixture(server_factory=_Server, request_model=_Request, cases_path=path)
    kwargs = {"reward_range": (0.0, 1.0), "determinism": "stochastic", **options}
    return asyncio.run(exercise_verifier_fixture(fixture, **kwargs))


def test_cases_that_hold_give_their_observed_rewards(tmp_path: Path) -> None:
    results = _run(_cases(tmp_path, FULL, ZERO, BAD))
    assert [(r.kind, r.observed_rewards) for r in results] == [
        ("full_reward", (1.0,)),
        ("zero_reward", (0.0,)),
        ("malformed", ()),
    ]


def test_an_unknown_kind_or_a_wrong_end_fails_naming_the_line_or_case(tmp_path: Path) -> None:
    wrong = {**ZERO, "kind": "not_a_kind"}
    with pytest.raises(VerifierFixtureError, match="line 2"):
        _run(_cases(tmp_path, FULL, wrong, BAD))
    lying = {**FULL, "name": "lies", "kind": "zero_reward", "expected_reward": 0.0}
    with pytest.raises(VerifierFixtureError, match=r"zero_reward case 'lies' must return 0\.0"):
        _run(_cases(tmp_path, FULL, lying, BAD))


def test_a_malformed_case_must_raise_the_error_it_names(tmp_path: Path) -> None:
    quiet = {**BAD, "request": {"answer": "maybe"}}
    with pytest.raises(VerifierFixtureError, match="did not raise"):
        _run(_cases(tmp_path, FULL, ZERO, quiet))
    other = {**BAD, "expected_error": "something else"}
    with pytest.raises(VerifierFixtureError, match="does not contain"):
        _run(_cases(tmp_path, FULL, ZERO, other))


def test_required_kinds_and_a_seeded_verifier_needs_a_determinism_case(tmp_path: Path) -> None:
    with pytest.raises(VerifierFixtureError, match="missing required cases: malformed"):
        _run(_cases(tmp_path, FULL, ZERO))
    with pytest.raises(VerifierFixtureError, match="missing required cases: determinism"):
        _run(_cases(tmp_path, FULL, ZERO, BAD), determinism="seeded")


def test_update_expected_rewrites_the_observed_rewards(tmp_path: Path) -> None:
    stale = {"name": "again", "kind": "full_reward", "request": {"answer": "yes"}, "expected_reward": 1.0}
    path = _cases(tmp_path, FULL, ZERO, BAD, {**stale, "kind": "determinism", "expected_reward": 0.5})
    _run(path, update_expected=True)  # a stochastic verifier skips the determinism case: unchanged
    assert json.loads(path.read_text().splitlines()[3])["expected_reward"] == 0.5
    path = _cases(tmp_path, {**FULL, "expected_reward": 1.0}, {**ZERO, "kind": "zero_reward"}, BAD)
    drifted = path.read_text().replace('"expected_reward": 0.0', '"expected_reward": 0.25')
    path.write_text(drifted)
    with pytest.raises(VerifierFixtureError, match=r"expected reward 0\.25, observed 0\.0"):
        _run(path)
    _run(path, update_expected=True)
    assert [json.loads(line).get("expected_reward") for line in path.read_text().splitlines()] == [
        1.0,
        0.0,
        None,
    ]
    assert _run(path)[1].observed_rewards == (0.0,)
