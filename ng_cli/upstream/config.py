"""Config of model servers that forward to OpenAI-compatible upstreams (vllm_model, openai_model).

`UpstreamConfig` holds what every such server needs: where the upstream is (one or several
`base_url`s), how to authenticate, and how long and how often to try. `VllmModelConfig` adds the
seed's vLLM fields; its five required keys have no defaults on purpose (the seed: "There are no
implicit defaults"), so a missing one is a config error that names it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ng_cli.config.nemo_gym import NemoGymKey
from ng_cli.config.placeholders import placeholder_names
from ng_cli.config.schema import ModelServerConfig
from ng_cli.config.secrets import mask_url
from ng_cli.servers.hop import RetryPolicy, Timeouts
from ng_cli.tokens.chat_template import find_tokenizer_dir
from ng_cli.upstream.userinfo import without_userinfo

__all__ = [
    "OpenAIModelConfig",
    "UpstreamConfig",
    "VllmModelConfig",
    "WeightUpdateDeadlines",
    "checked_url",
    "root_url_of",
]


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
    max_attempts: int = Field(default=3, ge=1)
    """Attempts per call (first try included) on connection errors, timeouts and 5xx; 4xx never retry.
    No upper bound, as NeMo Gym's `max_http_attempts` has none (its gdpval judges set 1800 to wait
    out a rate-limited judge): the caller's deadline and `total_timeout_s` still end a call."""
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
    default_headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers on every upstream request (NeMo Gym's key); `Authorization` is always
    the api_key's."""
    endpoint_file: str | None = None
    """A file holding the current upstream URL(s), one per line (NeMo Gym's key). It is re-read
    while running: when an RL trainer restarts or moves its engines and rewrites the file, new
    sessions go to the new URLs, requests in flight on the old ones finish there (drain), and
    the old endpoints leave the pool. `base_url` is used until the file exists."""
    endpoint_stale_grace_s: float = Field(default=300.0, ge=0)
    """How long the endpoint file may stay missing or empty before the last URLs are given up
    and requests answer 503 (NeMo Gym's key)."""
    endpoint_connection_retries: int | None = Field(default=8, ge=0, le=19)
    """With `endpoint_file`: retries per call after the first attempt (so `max_attempts` is this
    plus one), giving a call room to reach the engine's new address (NeMo Gym's key; null keeps
    `max_attempts`)."""
    endpoint_check_interval_s: float = Field(default=10.0, gt=0)
    """With `endpoint_file`: seconds between checks of the file's modification time."""

    @field_validator("base_url")
    @classmethod
    def _check_base_urls(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is None:  # only where a subclass makes it optional (local_vllm_model)
            return None
        urls = [value] if isinstance(value, str) else value
        if not urls:
            raise ValueError("base_url is an empty list; give at least one URL")
        cleaned = [checked_url(url) for url in urls]
        names = [without_userinfo(url) for url in cleaned]  # what names an endpoint
        duplicates = sorted({url for url in names if names.count(url) > 1})
        if duplicates:
            raise ValueError(f"base_url lists {duplicates} more than once")
        return cleaned[0] if isinstance(value, str) else cleaned

    @field_validator("api_key", "model", mode="before")
    @classmethod
    def _refuse_placeholders(cls, value: Any) -> Any:
        """`api_key: <api_key>` is a value to fill in, not a key to send (the call would be a 401)."""
        if isinstance(value, str) and placeholder_names(value):
            raise ValueError("holds a placeholder")
        return value

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
        attempts = self.max_attempts
        if self.endpoint_file is not None and self.endpoint_connection_retries is not None:
            attempts = self.endpoint_connection_retries + 1
        return RetryPolicy(max_attempts=attempts, backoff_s=self.backoff_s, max_backoff_s=self.max_backoff_s)


class WeightUpdateDeadlines(BaseModel):
    """The longest each phase of a weight update may take on one engine (nothing waits forever)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    pause_s: float = Field(default=120.0, gt=0)
    """Pausing an engine (`wait` mode drains its requests first, so this bounds the drain)."""
    reload_s: float = Field(default=600.0, gt=0)
    """Reading the checkpoint into the engine (an 8B model from a cold disk: ~10 s)."""
    verify_s: float = Field(default=60.0, gt=0)
    """Reading back the weights' fingerprint on every rank."""
    reset_s: float = Field(default=30.0, gt=0)
    """Resetting the prefix cache."""
    resume_s: float = Field(default=30.0, gt=0)
    """Resuming generation."""
    push_lease_s: float = Field(default=600.0, gt=0)
    """A tensor push (`begin`) neither committed nor aborted by then is aborted, and calls flow again."""
    sleep_lease_s: float = Field(default=3600.0, gt=0)
    """Engines asleep (`/admin/sleep`) with no `wake_up` by then are woken, so calls do not wait forever."""
    check_s: float = Field(default=30.0, gt=0)
    """Reading the new checkpoint's headers (a stalled network file system is refused, not waited on)."""


ReasoningField = Literal["both", "reasoning", "reasoning_content"]


def _default_reasoning_field() -> Any:
    """NeMo Gym's default: `$NEMO_GYM_REASONING_FIELD` (for launchers that pick the mode without a
    config override), else "both"; an explicit `reasoning_field` wins. Validated as the key is."""
    return os.environ.get("NEMO_GYM_REASONING_FIELD", "").strip() or "both"


class VllmModelConfig(UpstreamConfig):
    """`responses_api_models/vllm_model`: the Responses API over vLLM's Chat Completions."""

    return_token_id_information: bool
    """Attach `prompt_token_ids`, `generation_token_ids` and `generation_log_probs` (for RL training)."""
    return_generation_log_probs: bool = True
    """With `return_token_id_information`: also ask vLLM for the sampled tokens' logprobs
    (`generation_log_probs`). false: token ids only (vLLM's `return_token_ids`, no logprobs), for
    trainers that recompute logprobs; vLLM 0.26 on an H100 ran 0.77 of plain throughput with
    logprobs and 0.99 with token ids alone (docs/training.md). Needs the engine's token ids
    (`token_id_source: auto`); `token_exact: auto` then stays off (its completions call reads logprobs)."""
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
    request_prompt_and_generation_token_ids: bool | None = None
    """NeMo Gym's switch for the token-id source: true asks vLLM for `return_token_ids` (as
    token_id_source "auto"), false uses logprobs plus `/tokenize` (as "tokenize"); unset leaves
    `token_id_source` in charge."""
    uses_interleaved_reasoning: bool = True
    """With `uses_reasoning_parser`: send earlier turns' reasoning back to vLLM (false drops it
    from the history, as NeMo Gym does)."""
    reasoning_field: ReasoningField = Field(default_factory=_default_reasoning_field, validate_default=True)
    """Which field carries earlier reasoning on assistant messages sent to vLLM when
    `uses_reasoning_parser` is on: vLLM < 0.16 reads `reasoning_content`, later ones `reasoning`.
    Unset: `$NEMO_GYM_REASONING_FIELD`, else "both" (NeMo Gym's rule)."""
    preserve_reasoning_in_assistant_content: bool = False
    """Send earlier reasoning inline as `<think>...</think>` in `content` even with
    `uses_reasoning_parser` (for templates trained on that form)."""
    sampling_overrides: dict[str, Any] | None = None
    """Sampling fields (temperature, top_p, ...) put on every request to vLLM, replacing what the
    caller sent: on-policy training pins the distribution the policy is optimised under."""
    token_exact: bool | Literal["auto"] = False
    """Send `/v1/responses` prompts as token ids: the previous turn's exact prompt + generation
    ids, then the chat template's tail (tool results, the next user message, the generation
    prompt), through vLLM's `/v1/completions`, so no turn re-tokenizes the history (see
    docs/conversion.md, "Token-exact prompts"). Needs `return_token_id_information` and the model's
    tokenizer (`tokenizer_path`, or `model` naming a local directory); "auto": on when both are there."""
    tokenizer_path: str | None = None
    """A local directory with the served model's `tokenizer.json` and `tokenizer_config.json`
    (chat template), for `token_exact`; default: `model`, when it is a local directory."""
    tool_call_parser: Literal["hermes"] = "hermes"
    """How `token_exact` reads tool calls out of generated text (vLLM's `--tool-call-parser` name)."""
    continue_final_assistant_message: bool = False
    """When the input ends with an assistant message, ask vLLM to continue it
    (`continue_final_message: true, add_generation_prompt: false`) instead of starting a new
    assistant turn (NeMo Gym's key; benchmarks that seed an answer prefix, e.g. RULER, set it).
    With `uses_reasoning_parser`, what vLLM parses as reasoning is the continuation's text."""
    forward_request_chat_template_kwargs: bool = False
    """A request's own top-level `chat_template_kwargs`: false drops them (logged once; the
    configured ones and `metadata.chat_template_kwargs` still apply), true merges them over the
    configured ones (NeMo Gym's key and default: agents that add `enable_thinking` to every call
    would change the policy's generation regime)."""
    propagate_context_overflow_errors: bool = False
    """A prompt past the model's context: false answers the empty response marked incomplete (and
    counts it); true answers vLLM's HTTP 400 to the caller (NeMo Gym's key)."""
    forward_session_id_as_conversation_id: bool = False
    """Send the rollout's session id to the engine as `conversation_params.conversation_id` (a
    TensorRT-LLM extension that pins a conversation to one rank; strict OpenAI-compatible servers
    refuse the field, hence off; NeMo Gym's key)."""
    supply_prefix_token_ids: bool = False
    """NeMo Gym's prefix supply: it sends `required_prefix_token_ids` only for calls made under
    its token-id capture (`token_id_capture`), which no command runs here, and sends nothing for
    any other call; so with it on, calls go as without it, and a warning says so. Needs
    `return_token_id_information`, as in NeMo Gym. For exact prompt tokens here: `token_exact`."""

    nemo_gym_keys: ClassVar[dict[str, NemoGymKey]] = {
        "sequential_reasoning_allowed": NemoGymKey(
            True, "a response may hold several reasoning items; none is dropped"
        ),
        "is_responses_native": NemoGymKey(False, "requests always go through vLLM's Chat Completions API"),
        "audio_root": NemoGymKey(None, "audio input is not supported"),
        "use_completions_api": NemoGymKey(
            False, "token_exact: true renders and sends token prompts to /v1/completions"
        ),
        "render_chat_template": NemoGymKey(False, "only read with use_completions_api (see token_exact)"),
        "tokenizer": NemoGymKey(None, "only read with use_completions_api (see tokenizer_path)"),
        "token_id_capture_non_generating_requests": NemoGymKey(
            [], "token ids are attached per response (return_token_id_information)"
        ),
    }

    @model_validator(mode="after")
    def _check_prefix_supply(self) -> VllmModelConfig:
        if self.supply_prefix_token_ids and not self.return_token_id_information:
            raise ValueError(
                "supply_prefix_token_ids requires return_token_id_information=true"
            )  # NeMo Gym's rule
        return self

    def value_warnings(self) -> list[tuple[str, str]]:
        warnings = self._v1_warnings()
        if self.supply_prefix_token_ids:
            warnings.append(
                (
                    "supply_prefix_token_ids",
                    "true changes nothing here: NeMo Gym supplies a prefix only to calls made under its "
                    "token-id capture, which no command runs here (and sends none for other calls); "
                    "token_exact sends the previous turn's exact tokens on stock vLLM",
                )
            )
        return warnings

    @model_validator(mode="after")
    def _check_token_exact(self) -> VllmModelConfig:
        if not self.return_generation_log_probs and self.return_token_id_information:
            if self.token_id_source == "tokenize" or self.request_prompt_and_generation_token_ids is False:
                raise ValueError(
                    "return_generation_log_probs: false needs vLLM's own token ids (token_id_source: auto, "
                    "request_prompt_and_generation_token_ids unset or true): the tokenize route reads the "
                    "generated ids from the logprobs"
                )
            if self.token_exact is True:
                raise ValueError(
                    "token_exact: true reads the generated ids from the completions logprobs; it cannot run "
                    "with return_generation_log_probs: false"
                )
        if self.token_exact is not True:
            return self
        if self.continue_final_assistant_message:
            raise ValueError(
                "token_exact: true cannot run with continue_final_assistant_message: its prompt ends with "
                "the template's generation prompt, it does not continue a final assistant message"
            )
        if not self.return_token_id_information:
            raise ValueError(
                "token_exact: true needs return_token_id_information: true (the previous turn's ids are what is spliced)"
            )
        if self.tokenizer_dir() is None:
            named = (
                f"tokenizer_path {self.tokenizer_path!r}" if self.tokenizer_path else f"model {self.model!r}"
            )
            raise ValueError(
                f"token_exact: true needs the model's tokenizer, but {named} is not a local directory with "
                "tokenizer.json and tokenizer_config.json; set tokenizer_path to one"
            )
        return self

    def tokenizer_dir(self) -> Path | None:
        """Where the tokenizer is (`tokenizer_path`, else `model` as a directory), or None."""
        return find_tokenizer_dir(self.tokenizer_path or self.model)

    def wants_token_exact(self) -> bool:
        """`token_exact` resolved: true, or "auto" with token ids on and a tokenizer found."""
        if self.token_exact == "auto":
            return (
                not self.continue_final_assistant_message
                and self.return_token_id_information
                and self.return_generation_log_probs
                and self.tokenizer_dir() is not None
            )
        return bool(self.token_exact)

    @field_validator("base_url")
    @classmethod
    def _refuse_endpoint_paths(cls, value: str | list[str] | None) -> str | list[str] | None:
        """An API root, not one of its routes: `.../v1/chat/completions` would be posted to as
        `.../v1/chat/completions/chat/completions` (NeMo Gym takes it and fails on every call)."""
        if value is None:
            return None
        urls = [value] if isinstance(value, str) else value
        for index, url in enumerate(urls):
            if not urlsplit(url).path.rstrip("/").endswith(_ROUTES):
                continue
            which = "" if isinstance(value, str) else f" (entry {index}: {mask_url(url)!r})"
            raise ValueError(
                f"base_url is vLLM's API root, not one of its routes{which}; write {mask_url(_with_v1(url))!r}"
            )
        return value

    def _v1_warnings(self) -> list[tuple[str, str]]:
        """A base_url without /v1 is used as it is (as NeMo Gym uses it): calls go to
        `<base_url>/chat/completions`, which vLLM itself serves under /v1 only."""
        return [
            (
                "base_url",
                f"{mask_url(url)!r} does not end with /v1: calls go to {mask_url(url)}/chat/completions "
                f"(vLLM serves {mask_url(_with_v1(url))}/chat/completions); fine for a proxy with "
                "its own path, else add /v1",
            )
            for url in (self.base_urls if self.base_url is not None else [])  # None: local_vllm_model's own
            if not urlsplit(url).path.endswith("/v1")
        ]


class OpenAIModelConfig(UpstreamConfig):
    """`responses_api_models/openai_model`: pass-through to any OpenAI-compatible endpoint."""

    extra_body: dict[str, Any] | None = None
    """Fields added to every request body (a request's own keys win), as NeMo Gym's."""
    drop_input_reasoning_items: bool = False
    """Strip `reasoning` items from a Responses request's input before forwarding it (for
    endpoints that fail on their own content-less reasoning items echoed back)."""
    check_model_at_startup: bool = True
    """Fail at start when `GET <base_url>/models` does not list `model` (turn off for servers
    that do not list their models, e.g. some Azure deployments)."""

    @model_validator(mode="before")
    @classmethod
    def _nemo_gym_names(cls, data: Any) -> Any:
        """NeMo Gym's openai_model writes `openai_base_url`, `openai_api_key`, `openai_model`,
        `openai_default_headers` and `max_http_attempts`; they mean our keys of the same name."""
        if not isinstance(data, dict):
            return data
        renamed = dict(data)
        for theirs, ours in _OPENAI_NAMES.items():
            if theirs not in renamed:
                continue
            if ours in renamed:
                raise ValueError(f"give either {ours} or NeMo Gym's {theirs}, not both")
            renamed[ours] = renamed.pop(theirs)
        return renamed

    nemo_gym_keys: ClassVar[dict[str, NemoGymKey]] = {
        "max_concurrent_requests": NemoGymKey(None, "in-flight requests are not capped per server"),
        "token_id_capture_non_generating_requests": NemoGymKey([], "openai_model never attaches token ids"),
    }


_OPENAI_NAMES = {
    "openai_base_url": "base_url",
    "openai_api_key": "api_key",
    "openai_model": "model",
    "openai_default_headers": "default_headers",
    "max_http_attempts": "max_attempts",
}


def root_url_of(base_url: str) -> str:
    """The server root of an API root: `http://h:8000/v1` -> `http://h:8000` (vLLM's /health, /tokenize)."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit(parts._replace(path=path, query="", fragment=""))


def checked_url(url: str) -> str:
    """`url` in one spelling per endpoint; ValueError unless it is an http(s) URL without query.

    The host is lower-cased and the scheme's default port and a trailing slash dropped, so one
    endpoint written two ways is seen as listed twice (else it gets two pool entries and every
    metric series twice). A `user:password@` is kept (sent as basic auth, see `userinfo`);
    messages show it masked."""
    names = placeholder_names(url) if url.strip().startswith(("http://", "https://")) else []
    if names:  # `http://<host_url>:<port>/v1`: to be filled in before the server starts
        raise ValueError(f"{mask_url(url)!r} holds placeholders ({', '.join(f'<{name}>' for name in names)})")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http(s) URL such as http://localhost:8000/v1, got {mask_url(url)!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"base_url must not have a query or fragment, got {mask_url(url)!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the port must be a number from 1 to 65535, got {mask_url(url)!r}") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is not None and port != _DEFAULT_PORTS[parts.scheme]:
        host = f"{host}:{port}"
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{host}" if "@" in parts.netloc else host
    return urlunsplit(parts._replace(netloc=netloc, path=parts.path.rstrip("/")))


_DEFAULT_PORTS = {"http": 80, "https": 443}
_ROUTES = ("/chat/completions", "/completions", "/responses", "/models")


def _with_v1(url: str) -> str:
    """The URL the user most likely meant: the server root plus /v1."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for suffix in _ROUTES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    if not path.endswith("/v1"):
        path = path + "/v1"
    return urlunsplit(parts._replace(path=path))
