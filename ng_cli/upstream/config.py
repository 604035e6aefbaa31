"""Config of model servers that forward to OpenAI-compatible upstreams (vllm_model, openai_model).

`UpstreamConfig` holds what every such server needs: where the upstream is (one or several
`base_url`s), how to authenticate, and how long and how often to try. `VllmModelConfig` adds the
seed's vLLM fields; its five required keys have no defaults on purpose (the seed: "There are no
implicit defaults"), so a missing one is a config error that names it.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from ng_cli.config.schema import ModelServerConfig
from ng_cli.servers.http import RetryPolicy, Timeouts

__all__ = ["OpenAIModelConfig", "UpstreamConfig", "VllmModelConfig", "root_url_of"]


class UpstreamConfig(ModelServerConfig):
    """Where the upstream API is, its key, and the time and retry budget of every call to it."""

    base_url: str | list[str]
    """The upstream API root(s), e.g. `http://localhost:8000/v1`; a list load-balances sessions."""
    api_key: SecretStr
    """Sent as `Authorization: Bearer ...` only; never logged, never shown in errors."""
    model: str
    """The model name the upstream serves (as listed by its `GET /v1/models`)."""
    connect_timeout_s: float = Field(default=5.0, gt=0)
    """Longest wait to open a connection to an endpoint."""
    read_timeout_s: float = Field(default=600.0, gt=0)
    """Longest silence while waiting for an answer; a non-streamed generation is silent until done."""
    total_timeout_s: float = Field(default=900.0, gt=0)
    """Longest single attempt, from sending to the last byte."""
    max_attempts: int = Field(default=3, ge=1, le=20)
    """Attempts per call (first try included) on connection errors, timeouts and 5xx; 4xx never retry."""
    backoff_s: float = Field(default=0.1, ge=0)
    """Base of the exponential backoff between attempts (full jitter)."""
    max_backoff_s: float = Field(default=2.0, ge=0)
    """Cap of one backoff sleep."""
    health_probe_interval_s: float = Field(default=5.0, gt=0)
    """Seconds between health probes of each endpoint; a down endpoint is probed sooner."""
    probe_timeout_s: float = Field(default=5.0, gt=0)
    """Deadline of one health probe."""
    request_deadline_s: float = Field(default=60.0, gt=0)
    """Longest a call waits for a healthy endpoint (all down) before answering 503."""
    upstream_down_grace_s: float = Field(default=300.0, ge=0)
    """Once every endpoint has been unreachable this long, answer 503 `upstream_unavailable` at
    once (an open circuit) instead of making each request wait; probes go on in the background
    and the first endpoint back closes the circuit. 300 s covers an RL trainer restarting its
    engines."""
    startup_wait_s: float = Field(default=0.0, ge=0)
    """At start, how long to keep trying when no endpoint answers yet (0: fail at once)."""

    @field_validator("base_url")
    @classmethod
    def _check_base_urls(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is None:  # only where a subclass makes it optional (local_vllm_model)
            return None
        urls = [value] if isinstance(value, str) else value
        if not urls:
            raise ValueError("base_url is an empty list; give at least one URL")
        cleaned = [_checked_url(url) for url in urls]
        duplicates = sorted({url for url in cleaned if cleaned.count(url) > 1})
        if duplicates:
            raise ValueError(f"base_url lists {duplicates} more than once")
        return cleaned[0] if isinstance(value, str) else cleaned

    @model_validator(mode="after")
    def _check_timeouts(self) -> UpstreamConfig:
        if self.total_timeout_s < self.connect_timeout_s:
            raise ValueError(
                f"total_timeout_s ({self.total_timeout_s:g}) is shorter than connect_timeout_s "
                f"({self.connect_timeout_s:g})"
            )
        return self

    @property
    def base_urls(self) -> list[str]:
        """`base_url` as a list, trailing slashes removed."""
        return [self.base_url] if isinstance(self.base_url, str) else list(self.base_url)

    def timeouts(self) -> Timeouts:
        return Timeouts(
            connect_s=self.connect_timeout_s, read_s=self.read_timeout_s, total_s=self.total_timeout_s
        )

    def probe_timeouts(self) -> Timeouts:
        return Timeouts(
            connect_s=self.connect_timeout_s, read_s=self.probe_timeout_s, total_s=self.probe_timeout_s
        )

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts, backoff_s=self.backoff_s, max_backoff_s=self.max_backoff_s
        )


class VllmModelConfig(UpstreamConfig):
    """`responses_api_models/vllm_model`: the Responses API over vLLM's Chat Completions."""

    return_token_id_information: bool
    """Attach `prompt_token_ids`, `generation_token_ids` and `generation_log_probs` (for RL training)."""
    uses_reasoning_parser: bool
    """Turn `<think>...</think>` in the text into reasoning items (do not run vLLM's own parser)."""
    replace_developer_role_with_system: bool = False
    """Send "developer" messages as "system", for chat templates without a developer role."""
    chat_template_kwargs: dict[str, Any] | None = None
    """Chat template options for every request (a request's own keys win)."""
    extra_body: dict[str, Any] | None = None
    """Extra vLLM request fields for every request, e.g. `repetition_penalty` (a request's own keys win)."""
    token_id_source: Literal["auto", "tokenize"] = "auto"
    """Where token ids come from: vLLM's `return_token_ids` when it sends them, else (or always,
    with "tokenize") `token_id:<n>` logprobs plus `POST /tokenize` for the prompt."""

    @field_validator("base_url")
    @classmethod
    def _require_v1(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is None:
            return None
        urls = [value] if isinstance(value, str) else value
        for index, url in enumerate(urls):
            if urlsplit(url).path.rstrip("/").endswith("/v1"):
                continue
            which = "" if isinstance(value, str) else f" (entry {index}: {url!r})"
            raise ValueError(
                f"vLLM's base_url must end with /v1, the OpenAI-compatible API root{which}; "
                f"write {_with_v1(url)!r}"
            )
        return value


class OpenAIModelConfig(UpstreamConfig):
    """`responses_api_models/openai_model`: pass-through to any OpenAI-compatible endpoint."""

    check_model_at_startup: bool = True
    """Fail at start when `GET <base_url>/models` does not list `model` (turn off for servers
    that do not list their models, e.g. some Azure deployments)."""


def root_url_of(base_url: str) -> str:
    """The server root of an API root: `http://h:8000/v1` -> `http://h:8000` (vLLM's /health, /tokenize)."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit(parts._replace(path=path, query="", fragment=""))


def _checked_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http(s) URL such as http://localhost:8000/v1, got {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"base_url must not have a query or fragment, got {url!r}")
    return urlunsplit(parts._replace(path=parts.path.rstrip("/")))


def _with_v1(url: str) -> str:
    """The URL the user most likely meant: the server root plus /v1."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for suffix in ("/chat/completions", "/completions", "/responses", "/models"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    if not path.endswith("/v1"):
        path = path + "/v1"
    return urlunsplit(parts._replace(path=path))
