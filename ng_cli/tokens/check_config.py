"""`CheckTokensConfig`: the options of `ng_check_tokens`, read from the composed config tree."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ng_cli.config.command_options import command_options
from ng_cli.config.compose import ComposedConfig

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
    return command_options(
        composed,
        CheckTokensConfig,
        command="ng_check_tokens",
        asks={
            "input_jsonl_fpath": (
                "which rollouts file to check?",
                "ng_check_tokens +input_jsonl_fpath=results/out.jsonl  (rollouts with token ids)",
            )
        },
    )
