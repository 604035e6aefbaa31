"""Secret keys, masking, and the Secret wrapper."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from ng_cli.config.secrets import MASK, Redactor, Secret, is_secret_key, mask, mask_url, secret_values

SECRET = [
    "api_key",
    "policy_api_key",
    "openai_api_key",
    "hf_token",
    "access_token",
    "secret",
    "client_secret",
    "session_secret",
    "db_password",
    "PASSWORD",
    "apiKey",
    "OPENAI_API_KEY",
    "x-api-key",
    "Authorization",
    "hfToken",
    "apikey",
]
NOT_SECRET = [
    "max_tokens",
    "max_output_tokens",
    "return_token_id_information",
    "prompt_token_ids",
    "generation_token_ids",
    "tokenizer",
    "keyword",
    "monkey",
    "key_path",
    "secret_name",
    "base_url",
    "model",
    "",
]


@pytest.mark.parametrize("key", SECRET)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", NOT_SECRET)
def test_not_secret_keys(key: str) -> None:
    assert not is_secret_key(key)


def test_mask_is_deep_and_keeps_shape() -> None:
    tree = {
        "policy_api_key": "sk-1",
        "max_tokens": 5,
        "servers": [{"api_key": "sk-2", "name": "a"}, {"hf_token": None}],
        "api_key": ["k1", "k2"],
        "credentials": {"user": "u", "nested": {"x": 1}},
        "url": "http://user:pw@host:8000/v1",
    }
    masked = mask(tree)
    assert masked == {
        "policy_api_key": MASK,
        "max_tokens": 5,
        "servers": [{"api_key": MASK, "name": "a"}, {"hf_token": None}],
        "api_key": [MASK, MASK],
        "credentials": {"user": MASK, "nested": {"x": MASK}},
        "url": f"http://user:{MASK}@host:8000/v1",
    }
    assert tree["policy_api_key"] == "sk-1"  # the input is not touched


def test_mask_hides_a_secret_value_under_any_key() -> None:
    tree = {
        "policy_api_key": "sk-live-123456",
        "model": {
            "default_headers": {"X-Custom-Auth": "sk-live-123456", "X-Route": "Bearer sk-live-123456"},
            "args": ["--token-file", "sk-live-123456"],
            "base_url": "http://u:pw-987654@h/v1",
            "mirror": "pw-987654",
            "name": "EMPTY",
        },
        "local_key": "EMPTY",
    }
    masked = mask(tree)
    assert masked["model"] == {
        "default_headers": {"X-Custom-Auth": MASK, "X-Route": f"Bearer {MASK}"},
        "args": ["--token-file", MASK],
        "base_url": f"http://u:{MASK}@h/v1",
        "mirror": MASK,
        "name": "EMPTY",  # a placeholder, too short to be a key: not looked for by value
    }


def test_mask_of_a_part_needs_the_whole_trees_secrets() -> None:
    tree = {"policy_api_key": "sk-live-123456", "model": {"header": "sk-live-123456"}}
    assert mask(tree["model"]) == {"header": "sk-live-123456"}  # the part alone cannot know
    assert mask(tree["model"], redactor=Redactor.of(tree)) == {"header": MASK}


@pytest.mark.parametrize(
    "text", ["http://host/v1", "plain text with @ sign", "user@example.com", "http://user@host/x"]
)
def test_mask_url_leaves_strings_without_password(text: str) -> None:
    assert mask_url(text) == text


def test_secret_hides_its_value_in_reprs() -> None:
    secret = Secret("sk-live")
    assert repr(secret) == f"Secret('{MASK}')"
    assert "sk-live" not in repr({"k": secret})
    assert str(secret) == secret.reveal() == "sk-live"
    assert secret == Secret("sk-live")
    assert secret != Secret("other")
    assert {secret: 1}[Secret("sk-live")] == 1
    assert not Secret("")


def test_secret_values_are_what_mask_hides() -> None:
    tree = {
        "policy_api_key": "sk-live-123456",
        "model": {
            "api_key": SecretStr("sk-nested-abcdef"),
            "max_tokens": 12345678,
            "base_url": "http://u:pw-987654@h/v1",
        },
        "tokens": {"hf_token": ["hf_aaaaaaaaaa", "hf_bbbbbbbbbb"]},
        "name": "not-a-secret-at-all",
    }
    assert secret_values(tree) == {
        "sk-live-123456",
        "sk-nested-abcdef",
        "pw-987654",
        "hf_aaaaaaaaaa",
        "hf_bbbbbbbbbb",
    }


def test_redactor_hides_values_in_text_bytes_and_json_escapes() -> None:
    redactor = Redactor(["sk-live-123456", 'quote"key-1234', "EMPTY"])
    assert redactor.text("Authorization: Bearer sk-live-123456.") == f"Authorization: Bearer {MASK}."
    assert redactor.bytes(b'{"m": "sk-live-123456 sk-live-123456"}') == b'{"m": "*** ***"}'
    assert redactor.text('{"k": "quote\\"key-1234"}') == '{"k": "***"}'
    assert redactor.text("EMPTY stays: placeholders are too short to be keys").startswith("EMPTY")
    assert not Redactor(["short"])
