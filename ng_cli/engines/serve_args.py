"""`vllm_serve_kwargs` -> `vllm serve` argv, rendered the way vLLM's own parser reads them.

    true          --flag            (vLLM's booleans are BooleanOptionalAction: --no-flag exists)
    false         --no-flag
    null          (left out: vLLM's default)
    [a, b]        --flag a b
    {k: v}        --flag '{"k": v}' (JSON, as vLLM parses dict options)
    anything else --flag value

Secrets never reach argv (any local user can read it): `api_key` and `hf_token` move to the
environment variables vLLM reads instead; any other secret-looking key is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ng_cli.config.secrets import is_secret_key
from ng_cli.errors import ConfigError

__all__ = ["SECRET_KWARG_ENV", "render_serve_args", "split_secret_kwargs"]

SECRET_KWARG_ENV = {"api_key": "VLLM_API_KEY", "hf_token": "HF_TOKEN"}
"""Secret options vLLM also reads from its environment."""


def split_secret_kwargs(kwargs: Mapping[str, Any], *, where: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(options for argv, environment for the secrets); ConfigError for a secret with no env var."""
    public: dict[str, Any] = {}
    secret_env: dict[str, str] = {}
    for key, value in kwargs.items():
        name = key.replace("-", "_")
        if name in SECRET_KWARG_ENV:
            if value is not None:
                secret_env[SECRET_KWARG_ENV[name]] = str(value)
        elif is_secret_key(name):
            raise ConfigError(
                f"{where}vllm_serve_kwargs.{key}: a secret would be visible in the engine's argv",
                hint="pass it through vllm_serve_env_vars (the environment) instead",
            )
        else:
            public[key] = value
    return public, secret_env


def render_serve_args(kwargs: Mapping[str, Any]) -> list[str]:
    """The argv tokens for `kwargs`, in the order given."""
    return [token for key, value in kwargs.items() for token in _render(key, value)]


def _render(key: str, value: Any) -> Iterator[str]:
    flag = "--" + key.replace("_", "-")
    if value is None:
        return
    if value is True:
        yield flag
    elif value is False:
        yield "--no-" + key.replace("_", "-")
    elif isinstance(value, list | tuple):
        if value:
            yield flag
            yield from (_scalar(item) for item in value)
    elif isinstance(value, Mapping):
        yield flag
        yield json.dumps(value, separators=(",", ":"), sort_keys=False)
    else:
        yield flag
        yield _scalar(value)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
