"""Loading a tokenizer directory (ng_cli/tokens/chat_template.py): what is found, and the errors
that name the file and the problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ng_cli.tokens.chat_template import ChatTokenizer, TokenizerLoadError, find_tokenizer_dir


def test_end_of_turn_and_special_tokens(tiny: ChatTokenizer) -> None:
    assert (tiny.end_of_turn_text, tiny.end_of_turn_strips_right) == ("<|im_end|>", False)
    assert tiny.token_text(tiny.end_of_turn_id) == "<|im_end|>"
    assert tiny.encode("<|im_end|>") == [tiny.end_of_turn_id]


def test_tool_call_arguments_render_as_objects_like_vllm(tiny: ChatTokenizer) -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"city":"Paris"}'}}
    text = tiny.render(
        [{"role": "assistant", "content": None, "tool_calls": [call]}], add_generation_prompt=False
    )
    assert '{"name": "f", "arguments": {"city": "Paris"}}' in text  # re-serialised by tojson


def test_find_tokenizer_dir(tiny_tokenizer_dir: Path, tmp_path: Path) -> None:
    assert find_tokenizer_dir(str(tiny_tokenizer_dir)) == tiny_tokenizer_dir.resolve()
    assert find_tokenizer_dir("Qwen/Qwen3-0.6B") is None
    assert find_tokenizer_dir(str(tmp_path)) is None
    assert find_tokenizer_dir("models/tiny-weather") is not None  # relative to the repo root


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        ("no-tokenizer-json", r"no tokenizer.json"),
        ("bad-config-json", r"tokenizer_config.json:1: not valid JSON"),
        ("no-template", r"tokenizer_config.json: chat_template: no chat template"),
        ("bad-template", r"tok: the chat template does not compile: line 1"),
    ],
)
def test_load_errors_name_the_file(
    tiny_tokenizer_dir: Path, tmp_path: Path, breakage: str, expected: str
) -> None:
    directory = Path(shutil.copytree(tiny_tokenizer_dir, tmp_path / "tok"))
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    if breakage == "no-tokenizer-json":
        (directory / "tokenizer.json").unlink()
    elif breakage == "bad-config-json":
        config_path.write_text("{oops")
    elif breakage == "no-template":
        del config["chat_template"]
        config_path.write_text(json.dumps(config))
    else:
        config["chat_template"] = "{% for %}"
        config_path.write_text(json.dumps(config))
    with pytest.raises(TokenizerLoadError, match=expected):
        ChatTokenizer.load(directory)
