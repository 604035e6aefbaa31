"""Token ids between turns: the contract (contract.py), token-exact prompts (chat_template.py,
splice.py) and the drift check (drift.py)."""

from __future__ import annotations

from ng_cli.tokens.contract import (
    TOKEN_FIELDS,
    PromptTokenIdsMissingError,
    TokenContractError,
    TokenInfo,
    attach_token_info,
    extract_token_info,
    needs_prompt_tokenization,
    token_info_of,
)

__all__ = [
    "TOKEN_FIELDS",
    "PromptTokenIdsMissingError",
    "TokenContractError",
    "TokenInfo",
    "attach_token_info",
    "extract_token_info",
    "needs_prompt_tokenization",
    "token_info_of",
]
