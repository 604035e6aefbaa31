"""A command's own options out of the composed tree (ng_report, ng_check_tokens): typed, no typo ignored.

A key close to an option (`+input_jsonl_path=x`) is a ConfigError naming where it was set and the
option meant; a missing required option is asked for with the command's own example.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.schema import validate_block
from ng_cli.config.sources import COMMAND_LINE
from ng_cli.errors import ConfigError

__all__ = ["command_options"]

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
    for key, (question, hint) in asks.items():
        if key not in values:
            raise ConfigError(f"{key}: {question}", hint=hint)
    return validate_block(model, values, sources=composed.sources)
