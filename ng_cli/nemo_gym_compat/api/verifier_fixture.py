"""`nemo_gym.verifier_fixture`: a server's JSONL cases of verify inputs and expected rewards.

Servers import `VerifierFixture` to declare their cases for NeMo Gym's test runner; here the
declaration is kept and the cases can be loaded and checked with `load_verifier_fixture`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["VerifierFixture", "VerifierFixtureCase", "VerifierFixtureError", "load_verifier_fixture"]


class VerifierFixtureError(ValueError):
    """A fixture is invalid or does not match the verifier."""


@dataclass(frozen=True)
class VerifierFixture:
    server_factory: Callable[[], object]
    request_model: type[BaseModel]
    cases_path: str | Path
    invoke: Callable[..., Any] | None = None
    reseed: Callable[..., Any] | None = None


class VerifierFixtureCase(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: str = Field(min_length=1)
    kind: Literal["positive", "negative", "malformed", "edge", "stateful"] | str
    request: dict[str, Any]
    expected_reward: float | None = None
    expected_error: str | None = None


def load_verifier_fixture(path: str | Path) -> list[VerifierFixtureCase]:
    """The cases of a JSONL file; a bad line is a VerifierFixtureError naming file and line."""
    fixture_path = Path(path)
    cases = []
    for number, line in enumerate(fixture_path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            cases.append(VerifierFixtureCase.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as error:
            raise VerifierFixtureError(
                f"invalid verifier fixture '{fixture_path}' at line {number}: {error}"
            ) from error
    if not cases:
        raise VerifierFixtureError(f"verifier fixture '{fixture_path}' contains no cases")
    return cases
