"""Headers that carry credentials (`Cookie`, `X-Auth`, `X-Session`, ...) are masked by name, in
`mask`, in the redactor's values and in `ng_dump_config`'s real output; harmless names stay shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ng_cli.commands.dump_config import app
from ng_cli.config.secrets import MASK, Redactor, is_secret_header, is_secret_key, mask, secret_values

SECRET_HEADERS = [
    "Cookie",
    "cookie",
    "Set-Cookie",
    "Authorization",
    "Proxy-Authorization",
    "Authentication",
    "X-Auth",
    "X-Auth-Token",
    "X-Auth-User",
    "X-Authenticated-Userid",
    "X-Session",
    "X-Session-Id",
    "Session-Id",
    "X-CSRF-Token",
    "X-Api-Key",
    "Api-Key",
    "X-Amz-Security-Token",
    "X-Amz-Signature",
    "X-Vault-Token",
    "Private-Token",
    "XAuthToken",
]
HARMLESS_HEADERS = [
    "Content-Type",
    "Accept",
    "User-Agent",
    "X-Request-Id",
    "X-Forwarded-For",
    "X-Max-Tokens",
    "OpenAI-Organization",
    "Keep-Alive",
]


@pytest.mark.parametrize("name", SECRET_HEADERS)
def test_credential_headers_are_secret(name: str) -> None:
    assert is_secret_header(name)


@pytest.mark.parametrize("name", HARMLESS_HEADERS)
def test_harmless_headers_are_not(name: str) -> None:
    assert not is_secret_header(name)


@pytest.mark.parametrize(
    "key", ["Cookie", "Set-Cookie", "session_cookie", "X-Auth", "X-Auth-User", "X-Session-Id"]
)
def test_cookies_and_x_auth_or_session_names_are_secret_keys_anywhere(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["session_id", "Session-Id", "auth_mode", "max_tokens", "x_max_tokens"])
def test_session_and_auth_words_outside_headers_are_not_secret_keys(key: str) -> None:
    assert not is_secret_key(key)


COOKIE = "sessionid=c00k1e-value-0001"
TOKEN = "tok-session-value-0002"


def test_headers_mappings_mask_by_header_name_and_keep_the_rest() -> None:
    tree: dict[str, Any] = {
        "model": {
            "default_headers": {"Cookie": COOKIE, "Session-Id": TOKEN, "Content-Type": "application/json"},
            "max_tokens": 512,
            "Session-Id": "not-a-header-here",
        },
        "extra_headers": [f"Cookie: {COOKIE}", "Accept: text/plain"],
        "headers": [["X-Session", TOKEN], ["X-Request-Id", "req-7"]],
        "httpHeaders": [{"name": "X-Auth", "value": TOKEN}, {"name": "User-Agent", "value": "ng"}],
    }
    assert mask(tree) == {
        "model": {
            "default_headers": {"Cookie": MASK, "Session-Id": MASK, "Content-Type": "application/json"},
            "max_tokens": 512,
            "Session-Id": "not-a-header-here",
        },
        "extra_headers": [f"Cookie: {MASK}", "Accept: text/plain"],
        "headers": [["X-Session", MASK], ["X-Request-Id", "req-7"]],
        "httpHeaders": [{"name": "X-Auth", "value": MASK}, {"name": "User-Agent", "value": "ng"}],
    }
    assert secret_values(tree) == {COOKIE, TOKEN}
    assert Redactor.of(tree).text(f"upstream said: bad cookie {COOKIE}") == "upstream said: bad cookie ***"


def test_ng_dump_config_masks_credential_headers_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = {
        "Cookie": COOKIE,
        "Set-Cookie": "set-c00kie-value-0003",
        "X-Auth": "x-auth-value-0004",
        "X-Session": "x-session-value-0005",
        "Session-Id": "session-id-value-0006",
        "Proxy-Authorization": "Basic cHJveHk6dmFsdWUtMDAwNw==",
        "X-Request-Id": "req-7",
        "Content-Type": "application/json",
    }
    env = tmp_path / "env.yaml"
    env.write_text(
        "policy_base_url: http://127.0.0.1:8000/v1\npolicy_api_key: EMPTY\npolicy_model_name: tiny\n"
    )
    config = tmp_path / "headers.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "policy_model": {"responses_api_models": {"vllm_model": {"default_headers": headers}}},
                "responses_create_params": {"max_output_tokens": 64, "max_tokens": 64},
            }
        )
    )
    monkeypatch.setenv("NG_ENV_YAML", str(env))
    monkeypatch.delenv("NG_REPO_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["+config_paths=[responses_api_models/vllm_model/configs/vllm_model.yaml]", "-c", str(config)]
    )
    assert result.exit_code == 0, result.output
    for name, value in headers.items():
        if name not in ("X-Request-Id", "Content-Type"):
            assert value not in result.output, name
    shown = yaml.safe_load(result.stdout)
    assert shown["policy_model"]["responses_api_models"]["vllm_model"]["default_headers"] == {
        **{name: MASK for name in headers},
        "X-Request-Id": "req-7",
        "Content-Type": "application/json",
    }
    assert shown["responses_create_params"] == {"max_output_tokens": 64, "max_tokens": 64}
