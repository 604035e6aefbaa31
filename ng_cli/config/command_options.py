"""A command's own options out of the composed tree (ng_report, ng_check_tokens): typed, no typo ignored.

A key close to an option (`+input_jsonl_path=x`) is a ConfigError naming where it was set and the
option meant; a missing required option is asked for with the command's own example. A number
that is not finite (`inf`, `nan`, `1e999`: Hydra reads them as floats) is refused wherever it
sits in an option's value (`refuse_non_finite`, also used by the collector's and
ng_reward_profile's options): `+rollout_timeout_s=inf` failed every rollout, `nan` compares
false with everything, and JSON cannot carry either upstream.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.schema import validate_block
from ng_cli.config.sources import COMMAND_LINE, Sources
from ng_cli.errors import ConfigError

__all__ = ["command_options", "refuse_non_finite"]

M = TypeVar("M", bound=BaseModel)


def command_options(composed: ComposedConfig, model: type[M], *, asks: Mapping[str, tuple[str, str]]) -> M:
    """`model` validated from the tree's keys of the same names.

    `asks`: required option -> (the question, the hint with an example) when it is missing.
    """
    fields = tuple(model.model_fields)
    for key in composed.tree:
        close = [] if key in fields else difflib.get_close_matches(key, fields, n=1, cutoff=0.8)
        if close:
            where = composed.sources.lookup(key) or COMMAND_LINE
            raise ConfigError(f"{where}  {key}: unknown option", hint=f"did you mean +{close[0]}=...?")
    values = {key: composed.tree[key] for key in fields if composed.tree.get(key) is not None}
    refuse_non_finite(values, composed.sources)
    for key, (question, hint) in asks.items():
        if key not in values:
            raise ConfigError(f"{key}: {question}", hint=hint)
    return validate_block(model, values, sources=composed.sources)


def refuse_non_finite(values: Mapping[str, Any], sources: Sources) -> None:
    """ConfigError naming every key (dotted, with file:line) whose value holds `inf` or `nan`."""
    problems = [
        f"{sources.lookup(key) or COMMAND_LINE}  {key}: expected a finite number, got {number!r}"
        for key, number in _non_finite(values, "")
    ]
    if problems:
        raise ConfigError("\n".join(problems), hint="give a finite number (a time limit, a threshold, ...)")


def _non_finite(value: Any, key: str) -> Iterator[tuple[str, float]]:
    if isinstance(value, float) and not math.isfinite(value):
        yield key, value
    elif isinstance(value, Mapping):
        for child_key, child in value.items():
            yield from _non_finite(child, f"{key}.{child_key}" if key else str(child_key))
    elif isinstance(value, list | tuple):
        for index, child in enumerate(value):
            yield from _non_finite(child, f"{key}.{index}")
