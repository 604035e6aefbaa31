"""`nemo_gym.verifier_fixture`: a server's JSONL cases of verify inputs and expected rewards.

Servers declare `VERIFIER_FIXTURE = VerifierFixture(...)` in their app.py and their own tests call
`await exercise_verifier_fixture(VERIFIER_FIXTURE, reward_range=..., determinism=...)`: each case
runs the verifier in-process on a fresh server (no HTTP), a `malformed` case must raise an error
that contains its `expected_error`, the others must return their `expected_reward` (the
`full_reward` and `zero_reward` cases pin the range's ends; a `determinism` case, required when the
verifier is `seeded`, must repeat on a second fresh server). The contract is NeMo Gym's, written
here from its documented behaviour; `update_expected=True` rewrites the file with what was observed.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ng_cli.outputs import write_bytes_atomically

__all__ = [
    "VerifierFixture",
    "VerifierFixtureCase",
    "VerifierFixtureError",
    "VerifierFixtureResult",
    "exercise_verifier_fixture",
    "load_verifier_fixture",
]

CaseKind = Literal["full_reward", "zero_reward", "malformed", "determinism"]
Invocation = Callable[[Any, BaseModel], Any]
_DETERMINISM = ("seeded", "stochastic", "unknown")


class VerifierFixtureError(ValueError):
    """A fixture is invalid or the verifier does not behave as it says."""


@dataclass(frozen=True)
class VerifierFixture:
    server_factory: Callable[[], object]
    request_model: type[BaseModel]
    cases_path: str | Path
    invoke: Invocation | None = None
    """How to call the verifier (default: `server.verify(request)`)."""
    reseed: Invocation | None = None
    """Puts a fresh server in the state a `determinism` case needs."""


class VerifierFixtureCase(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: str = Field(min_length=1)
    kind: CaseKind
    request: dict[str, Any]
    expected_reward: Annotated[float, Field(strict=True, allow_inf_nan=False)] | None = None
    expected_error: str | None = None

    @model_validator(mode="after")
    def _one_expectation(self) -> VerifierFixtureCase:
        """A malformed case expects an error, every other kind a reward: never both."""
        if self.kind == "malformed":
            if not self.expected_error or self.expected_reward is not None:
                raise ValueError("a malformed case requires expected_error and forbids expected_reward")
        elif self.expected_reward is None or self.expected_error is not None:
            raise ValueError(f"a {self.kind} case requires expected_reward and forbids expected_error")
        return self


@dataclass(frozen=True)
class VerifierFixtureResult:
    name: str
    kind: CaseKind
    observed_rewards: tuple[float, ...] = ()


def load_verifier_fixture(path: str | Path) -> list[VerifierFixtureCase]:
    """The cases of a JSONL file; a bad line is a VerifierFixtureError naming file and line."""
    fixture_path = Path(path)
    try:
        lines = fixture_path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeError) as error:
        raise VerifierFixtureError(f"could not read verifier fixture '{fixture_path}': {error}") from error
    cases = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            cases.append(VerifierFixtureCase.model_validate(json.loads(line)))
        except json.JSONDecodeError as error:
            raise VerifierFixtureError(
                f"invalid JSON in verifier fixture '{fixture_path}' at line {number}: {error.msg}"
            ) from error
        except ValidationError as error:
            first = error.errors(include_url=False, include_context=False, include_input=False)[0]
            raise VerifierFixtureError(
                f"invalid verifier fixture '{fixture_path}' at line {number}: {first['msg']}"
            ) from error
    if not cases:
        raise VerifierFixtureError(f"verifier fixture '{fixture_path}' contains no cases")
    return cases


async def exercise_verifier_fixture(
    fixture: VerifierFixture,
    *,
    reward_range: Sequence[float],
    higher_is_better: bool = True,
    determinism: str | Enum,
    update_expected: bool = False,
) -> tuple[VerifierFixtureResult, ...]:
    """Run every case of the fixture against fresh servers (see the module's docstring); the
    first case that does not behave raises VerifierFixtureError naming it."""
    path = Path(fixture.cases_path)
    cases = load_verifier_fixture(path)
    lower, upper = _range(reward_range)
    if not isinstance(higher_is_better, bool):
        raise VerifierFixtureError("higher_is_better must be a boolean")
    mode = str(getattr(determinism, "value", determinism))
    if mode not in _DETERMINISM:
        raise VerifierFixtureError(
            f"unsupported determinism value: {mode!r} (one of {', '.join(_DETERMINISM)})"
        )
    required = {"full_reward", "zero_reward", "malformed"} | ({"determinism"} if mode == "seeded" else set())
    missing = sorted(required - {case.kind for case in cases})
    if missing:
        raise VerifierFixtureError(
            f"verifier fixture '{path}' is missing required cases: {', '.join(missing)}"
        )
    ends = {
        "full_reward": upper if higher_is_better else lower,
        "zero_reward": lower if higher_is_better else upper,
    }
    results: list[VerifierFixtureResult] = []
    observed_by_index: dict[int, float] = {}
    for index, case in enumerate(cases):
        if case.kind == "determinism" and mode != "seeded":
            continue
        if case.kind == "malformed":
            await _expect_error(fixture, case)
            results.append(VerifierFixtureResult(case.name, case.kind))
            continue
        observed = [await _reward(fixture, case, reseed=case.kind == "determinism")]
        if not lower <= observed[0] <= upper:
            raise VerifierFixtureError(
                f"case '{case.name}' returned reward {observed[0]} outside the declared range [{lower}, {upper}]"
            )
        if case.kind in ends and observed[0] != ends[case.kind]:
            raise VerifierFixtureError(
                f"{case.kind} case '{case.name}' must return {ends[case.kind]} (the range's "
                f"{'upper' if ends[case.kind] == upper else 'lower'} end), observed {observed[0]}"
            )
        if case.kind == "determinism":
            observed.append(await _reward(fixture, case, reseed=True))
            if observed[1] != observed[0]:
                raise VerifierFixtureError(
                    f"determinism case '{case.name}' changed on a fresh server: {observed[0]} then {observed[1]}"
                )
        if update_expected:
            observed_by_index[index] = observed[0]
        elif observed[0] != case.expected_reward:
            raise VerifierFixtureError(
                f"case '{case.name}': expected reward {case.expected_reward}, observed {observed[0]}"
            )
        results.append(VerifierFixtureResult(case.name, case.kind, tuple(observed)))
    if update_expected:
        _rewrite(path, cases, observed_by_index)
    return tuple(results)


def _range(reward_range: Sequence[float]) -> tuple[float, float]:
    if len(reward_range) != 2:
        raise VerifierFixtureError("reward_range must have exactly two ends")
    if any(isinstance(end, bool) or not isinstance(end, int | float) for end in reward_range):
        raise VerifierFixtureError("reward_range's ends must be numbers")
    lower, upper = float(reward_range[0]), float(reward_range[1])
    if not (math.isfinite(lower) and math.isfinite(upper)) or lower > upper:
        raise VerifierFixtureError("reward_range must be two finite ends, lower <= upper")
    return lower, upper


async def _call(fixture: VerifierFixture, case: VerifierFixtureCase, *, reseed: bool) -> Any:
    """Build a fresh server, validate the request, (reseed,) verify; errors pass through."""
    if reseed and fixture.reseed is None:
        raise VerifierFixtureError("a determinism case needs the fixture's reseed")
    try:
        server = fixture.server_factory()
    except Exception as error:
        raise VerifierFixtureError(f"case '{case.name}' could not create a fresh server: {error}") from error
    request = fixture.request_model.model_validate(case.request)
    if reseed and fixture.reseed is not None:
        await _awaited(fixture.reseed(server, request))
    if fixture.invoke is not None:
        return await _awaited(fixture.invoke(server, request))
    verify = getattr(server, "verify", None)
    if not callable(verify):
        raise VerifierFixtureError("server_factory returned an object without a callable verify method")
    return await _awaited(verify(request))


async def _awaited(value: Any | Awaitable[Any]) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _reward(fixture: VerifierFixture, case: VerifierFixtureCase, *, reseed: bool = False) -> float:
    try:
        result = await _call(fixture, case, reseed=reseed)
    except VerifierFixtureError:
        raise
    except Exception as error:
        raise VerifierFixtureError(f"case '{case.name}' failed: {error}") from error
    reward = result.get("reward") if isinstance(result, Mapping) else getattr(result, "reward", result)
    if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
        raise VerifierFixtureError(f"case '{case.name}' returned no finite numeric reward: {reward!r}")
    return float(reward)


async def _expect_error(fixture: VerifierFixture, case: VerifierFixtureCase) -> None:
    try:
        await _call(fixture, case, reseed=False)
    except VerifierFixtureError:
        raise
    except Exception as error:
        if case.expected_error is not None and case.expected_error not in str(error):
            raise VerifierFixtureError(
                f"malformed case '{case.name}': the error does not contain {case.expected_error!r}: {error}"
            ) from error
        return
    raise VerifierFixtureError(f"malformed case '{case.name}' did not raise an error")


def _rewrite(path: Path, cases: list[VerifierFixtureCase], observed: Mapping[int, float]) -> None:
    """The file with each run case's expected_reward set to what was observed (only if changed)."""
    updated = [
        case.model_copy(update={"expected_reward": observed[i]}) if i in observed else case
        for i, case in enumerate(cases)
    ]
    if updated == cases:
        return
    if path.is_symlink() or not path.is_file():
        raise VerifierFixtureError(f"refusing to replace '{path}': not a regular file")
    text = "".join(
        json.dumps(case.model_dump(mode="json", exclude_none=True), sort_keys=True) + "\n" for case in updated
    )
    write_bytes_atomically(path, text.encode("utf-8"))
