"""A tokenizer directory built offline once per session (the tiny model's BPE, no weights)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.tokens.chat_template import ChatTokenizer
from tests.fixtures.tokens.tokenizer_dirs import build_tiny_tokenizer


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tiny-tokenizer"))


@pytest.fixture(scope="session")
def tiny(tiny_tokenizer_dir: Path) -> ChatTokenizer:
    return ChatTokenizer.load(tiny_tokenizer_dir)
