"""`CheckTokensConfig`: the options of `ng_check_tokens`, read from the composed config tree."""

from __future__ import annotations

import difflib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.schema import validate_block
from ng_cli.config.sources import COMMAND_LINE
from ng_cli.errors import ConfigError

__all__ = ["CheckTokensConfig", "check_tokens_config_from"]


class CheckTokensConfig(BaseModel):
    """Which rollouts to check, and the tokenizer that spells the diverging tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    input_jsonl_fpath: Path
    """Rollouts with token ids (the output of ng_collect_rollouts with return_token_id_information)."""
    tokenizer_path: Path | None = None
    """The model's tokenizer directory, to show diverging tokens as text (default: ids only)."""


def check_tokens_config_from(composed: ComposedConfig) -> CheckTokensConfig:
    """Pick this command's keys out of the tree; a bad, missing or misspelt one is a ConfigError."""
    fields = tuple(CheckTokensConfig.model_fields)
    for key in composed.tree:
        close = [] if key in fields else difflib.get_close_matches(key, fields, n=1, cutoff=0.8)
        if close:  # `+input_jsonl_path=x` must not be ignored silently
            where = composed.sources.lookup(key) or COMMAND_LINE
            raise ConfigError(f"{where}  {key}: unknown option", hint=f"did you mean +{close[0]}=...?")
    values = {key: composed.tree[key] for key in fields if composed.tree.get(key) is not None}
    if "input_jsonl_fpath" not in values:
        raise ConfigError(
            "input_jsonl_fpath: which rollouts file to check?",
            hint="ng_check_tokens +input_jsonl_fpath=results/out.jsonl  (rollouts with token ids)",
        )
    return validate_block(CheckTokensConfig, values, sources=composed.sources)
