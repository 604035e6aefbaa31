"""Pydantic models of server blocks, and the one place a ValidationError becomes a ConfigError.

Our own config models forbid unknown keys (a typo must not be silently ignored) and are frozen
(a config is read, never mutated). Each field's attribute docstring is its description, so it
shows in `--help` and in generated docs. A server implementation subclasses the matching
`*Config` with its own fields and declares it as its `config_class`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from ng_cli.config.instances import ServerInstance
from ng_cli.config.nemo_gym import NemoGymKey, NemoGymKeyUse, split_nemo_gym_keys
from ng_cli.config.placeholders import is_placeholder, is_placeholder_text
from ng_cli.config.secrets import MASK, is_secret_key, mask
from ng_cli.config.sources import Sources
from ng_cli.errors import ConfigError, IncompleteConfigError

__all__ = [
    "AgentServerConfig",
    "DatasetConfig",
    "Domain",
    "ModelServerConfig",
    "ResourcesServerConfig",
    "ServerConfig",
    "ServerRef",
    "ServerType",
    "validate_block",
]

ServerType = Literal["responses_api_models", "resources_servers", "responses_api_agents"]
Domain = Literal[
    "math",
    "coding",
    "agent",
    "knowledge",
    "instruction_following",
    "long_context",
    "safety",
    "games",
    "e2e",
    "other",
]
M = TypeVar("M", bound=BaseModel)


class _ConfigModel(BaseModel):
    # allow_inf_nan=False: `read_timeout_s: .inf` would be a limit that never holds
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)

    nemo_gym_keys: ClassVar[dict[str, NemoGymKey]] = {}
    """NeMo Gym keys accepted at their default with a warning (see `ng_cli.config.nemo_gym`)."""
    _warnings: tuple[str, ...] = PrivateAttr(default=())

    @property
    def config_warnings(self) -> tuple[str, ...]:
        """One line per accepted key that changes nothing here, or whose value works but is
        likely not what was meant ("file:line  key: why")."""
        return self._warnings

    def value_warnings(self) -> list[tuple[str, str]]:
        """(key, why) for each value that is accepted but likely not what was meant."""
        return []


class ServerRef(_ConfigModel):
    """A reference from one server instance to another."""

    type: ServerType
    """The server type of the instance referred to."""
    name: str
    """The instance name: a top-level key of the config tree."""


class ServerConfig(_ConfigModel):
    """Fields every server block has."""

    entrypoint: str = "app.py"
    """The Python file, relative to the implementation folder, that defines the server."""
    host: str = "127.0.0.1"
    """Interface to listen on; loopback unless the stack spans machines."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """Port to listen on; unset means the launcher picks a free one (bound before the child starts)."""
    max_request_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    """Largest request body accepted (413 above it), counted as it streams in: 32 MiB leaves room
    for the base64 images of a long multimodal conversation."""
    max_request_bytes_in_flight: int | None = Field(default=None, ge=1024)
    """Total body bytes of the requests served at once, each held from its first byte until its
    answer ends (a parsed body costs about 4x its bytes in memory, so this bounds the server's).
    A request that does not fit waits, unread, up to `request_bytes_wait_s`, then is a 503.
    Unset: 8 x `max_request_bytes` (256 MiB at its default), room for hundreds of long
    conversations with token ids (each turn's ids come back in the next request)."""
    request_bytes_wait_s: float = Field(default=300.0, gt=0)
    """Longest wait for room under `max_request_bytes_in_flight` (the caller's deadline, when
    shorter, wins); then the request is answered 503 `ServerBusyError`."""

    nemo_gym_keys: ClassVar[dict[str, NemoGymKey]] = {
        "num_workers": NemoGymKey(None, "every server is one asyncio process; concurrency is per request"),
    }

    @model_validator(mode="after")
    def _check_body_limits(self) -> ServerConfig:
        if self.request_bytes_in_flight_limit < self.max_request_bytes:
            raise ValueError(
                f"max_request_bytes_in_flight ({self.max_request_bytes_in_flight}) is smaller than "
                f"max_request_bytes ({self.max_request_bytes}): a body of the largest size could never be served"
            )
        return self

    @property
    def request_bytes_in_flight_limit(self) -> int:
        """`max_request_bytes_in_flight`, or its default: 8 bodies of the largest size."""
        return self.max_request_bytes_in_flight or 8 * self.max_request_bytes


class ModelServerConfig(ServerConfig):
    """A model server (`responses_api_models/<implementation>`)."""


class ResourcesServerConfig(ServerConfig):
    """A resources server: tools, session state and the verifier of one environment."""

    domain: Domain | None = None
    """What the environment exercises, for reports and dataset catalogues."""
    description: str | None = None
    """One line on what the environment is (NeMo Gym configs carry it for catalogues)."""
    verified: bool = False
    """Whether the environment's rewards were checked against a reference (NeMo Gym's flag)."""
    value: str | None = None
    """What training on the environment is meant to improve (NeMo Gym's catalogue text)."""

    nemo_gym_keys: ClassVar[dict[str, NemoGymKey]] = {
        "expose_tools_over_mcp": NemoGymKey(
            False, "our own environments serve tools over HTTP only; NeMo Gym's servers run here can set it"
        ),
    }


class DatasetConfig(_ConfigModel):
    """One JSONL dataset an agent can be run on."""

    name: str
    """Short name, unique within the agent."""
    type: Literal["train", "validation", "example", "benchmark"]
    """What the data is for; `example` rows are small and checked into the repo; `benchmark` is
    NeMo Gym's type for a benchmark's data (`benchmarks/<name>/config.yaml`), which its
    `prepare_script` makes (not run here: `ng_prepare_benchmark` says why)."""
    jsonl_fpath: str
    """Path of the JSONL file, relative to the repo root or absolute."""
    license: str | None = None
    """License of the data (e.g. "Apache 2.0", "MIT")."""
    num_repeats: int = Field(default=1, ge=1)
    """How many rollouts to collect per row."""
    gitlab_identifier: dict[str, Any] | None = None
    """Accepted for NeMo Gym configs (where to download the file from); not used here."""
    huggingface_identifier: dict[str, Any] | None = None
    """Accepted for NeMo Gym configs (where to download the file from); not used here."""
    source: dict[str, Any] | None = None
    """NeMo Gym's unified download source (`{type: gitlab|huggingface, ...}`); not used here:
    rows are read from `jsonl_fpath`."""
    prepare_script: str | None = None
    """NeMo Gym's script that materialises the file; not run here."""
    prepare_dependencies: list[str] = Field(default_factory=list)
    """Packages NeMo Gym installs before `prepare_script`; not used here."""
    taskset: str | None = None
    """NeMo Gym's taskset identifier for environment servers; not used here."""
    prompt_config: str | None = None
    """NeMo Gym's prompt template for raw rows; only null here: template the rows first with
    `ng_materialize_prompts` and point `jsonl_fpath` at its output."""

    @field_validator("prompt_config")
    @classmethod
    def _prompt_config_unset(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(
                f"a dataset's prompt_config ({value}) is not applied at collection here; run "
                "ng_materialize_prompts on the raw rows and set jsonl_fpath to its output"
            )
        return value


class AgentServerConfig(ServerConfig):
    """An agent: runs the tool loop between a model server and a resources server."""

    resources_server: ServerRef
    """The resources server whose tools and verifier the agent uses."""
    model_server: ServerRef
    """The model server the agent calls for each turn."""
    datasets: list[DatasetConfig] = Field(default_factory=list)
    """Datasets this agent can be run on."""
    num_workers: int = Field(default=1, ge=1, le=64)
    """Processes serving this agent on its one port (the kernel spreads connections over them).
    An agent keeps no state between requests, so at hundreds of rollouts in flight more
    workers take its per-request CPU off one core (docs/running.md, "Agent workers")."""

    nemo_gym_keys: ClassVar[dict[str, NemoGymKey]] = {
        "session_close_retry_window_seconds": NemoGymKey(300, "sessions hold no state after /run returns"),
        "skip_verification": NemoGymKey(False, "every rollout is verified"),
        "skip_verification_reward": NemoGymKey(0.0, "only read with skip_verification"),
        "token_id_capture": NemoGymKey(False, "token ids come from the model server's responses"),
        "tool_accesses": NemoGymKey([], "the agent calls the resources server's tools directly"),
        "execute_tools": NemoGymKey(True, "the agent always executes the tools the model calls"),
    }

    @model_validator(mode="after")
    def _check_reference_types(self) -> AgentServerConfig:
        if self.resources_server.type != "resources_servers":
            raise ValueError(
                f"resources_server must refer to resources_servers, not {self.resources_server.type}"
            )
        if self.model_server.type != "responses_api_models":
            raise ValueError(f"model_server must refer to responses_api_models, not {self.model_server.type}")
        return self


def validate_block(
    model_cls: type[M],
    target: ServerInstance | str | Mapping[str, Any] | None = None,
    /,
    block: Mapping[str, Any] | None = None,
    *,
    instance: ServerInstance | str | None = None,
    source: str | None = None,
    sources: Sources | None = None,
) -> M:
    """Validate a block (default: the instance's) into `model_cls`; every problem in one ConfigError.

    Called as `validate_block(Model, instance[, block])` in the parent, where the composed
    `ServerInstance` is known, or as `validate_block(Model, block, instance="name")` in a server
    child, which knows only its instance name.

    Args:
        target: the `ServerInstance` (or its name), or the block itself.
        source: "file:line" shown for problems when `sources` has no line for the key
            (default: where the instance was defined).
        sources: per-key provenance (`ComposedConfig.sources`) for exact lines.
    """
    if isinstance(target, Mapping):
        block, target = target, None
    owner = _Owner.of(instance if instance is not None else target, source)
    if block is None:
        if not isinstance(target, ServerInstance):
            raise TypeError("validate_block needs a ServerInstance or a block")
        block = target.block
    kept, uses = split_nemo_gym_keys(model_cls, block)
    refusals = [_located(use, owner, sources) for use in uses if use.is_error]
    try:
        validated = model_cls.model_validate(kept)
    except ValidationError as exc:
        errors = exc.errors()
        problems = refusals + list(
            dict.fromkeys(_describe(error, model_cls, owner, sources) for error in errors)
        )
        summary, hint = _summary(problems, owner, model_cls), _hint(errors, owner)
        missing = any(error["type"] == "missing" for error in errors)
        if not refusals and all(_is_unset(error) or error["type"] == "missing" for error in errors):
            # a key missing, or a placeholder: a block that waits to be completed (NeMo Gym reads
            # it only when its server starts); a missing key is added where the block is written
            raise IncompleteConfigError(
                summary, hint=hint if missing else _unset_hint(errors, owner)
            ) from exc
        raise ConfigError(summary, hint=hint) from exc
    if refusals:
        raise ConfigError(_summary(refusals, owner, model_cls))
    if isinstance(validated, _ConfigModel):
        own = tuple(_located(use, owner, sources) for use in uses)
        validated._warnings = own + tuple(
            _at_key(key, message, owner, sources) for key, message in validated.value_warnings()
        )
    return validated


def _unset_hint(errors: list[ErrorDetails], owner: _Owner) -> str:
    """What to set: a placeholder's key or a missing one (a block that another file, env.yaml or
    the command line completes: NeMo Gym reads it only when its server starts)."""
    keys = list(dict.fromkeys(_unset_key(error) for error in errors))
    if not owner.is_tree_key:
        return f"set {', '.join(keys)} before the server starts"
    flags = " ".join(f"++{owner.key}.{key}=..." for key in keys)
    return f"set it in a config file or on the command line before the server starts: {flags}"


def _unset_key(error: ErrorDetails) -> str:
    """The key of a placeholder's error, without the union branch pydantic tried (`base_url.str`)."""
    parts = list(error["loc"])
    while parts and isinstance(parts[-1], str) and _UNION_BRANCH.match(parts[-1]):
        parts.pop()
    return ".".join(str(part) for part in parts)


def _is_unset(error: ErrorDetails) -> bool:
    """A problem only because the value is a placeholder (null, `<name>`, `MISSING`): the config
    waits for it to be filled in, as NeMo Gym's does until the server that reads it starts."""
    return error["type"] not in ("missing", "extra_forbidden") and is_placeholder(error.get("input"))


def _at_key(key: str, message: str, owner: _Owner, sources: Sources | None) -> str:
    dotted = ".".join(part for part in (owner.key, key) if part)
    origin = (sources.lookup(dotted) if sources else None) or owner.source
    where = f"{origin}  " if origin else ""
    return f"{where}{dotted}: {message}"


def _located(use: NemoGymKeyUse, owner: _Owner, sources: Sources | None) -> str:
    return _at_key(use.key, use.message, owner, sources)


@dataclass(frozen=True)
class _Owner:
    """How messages name the block being validated."""

    label: str | None
    """E.g. "instance 'policy_model' (responses_api_models/vllm_model)"."""
    key: str
    """Dotted prefix of the block's keys in messages (empty when unknown)."""
    source: str | None
    is_tree_key: bool = False
    """Whether `key` is the block's real dotted path in the tree (usable in a `++key=...`)."""
    name: str | None = None
    """The instance's name, when known."""

    @classmethod
    def of(cls, instance: ServerInstance | str | Mapping[str, Any] | None, source: str | None) -> _Owner:
        if isinstance(instance, ServerInstance):
            label = f"instance '{instance.name}' ({instance.kind})"
            return cls(label, instance.key, source or instance.source, is_tree_key=True, name=instance.name)
        if isinstance(instance, str):
            return cls(f"instance '{instance}'", instance, source, name=instance)
        return cls(None, "", source)


def _describe(error: ErrorDetails, model_cls: type[BaseModel], owner: _Owner, sources: Sources | None) -> str:
    if _is_unset(error):  # one line per key, whichever branch of a union pydantic tried
        dotted = ".".join(part for part in (owner.key, _unset_key(error)) if part) or "<block>"
        origin = (sources.lookup(dotted) if sources else None) or owner.source
        where = f"{origin}  " if origin else ""
        server = f"the server '{owner.name}'" if owner.name else "the server"
        shown = _shown(error)
        what = "is not set (null)" if shown == "null" else f"is still a placeholder ({shown})"
        return f"{where}{dotted} {what}; {server} cannot start until it is set"
    loc = ".".join(str(part) for part in error["loc"])
    dotted = ".".join(part for part in (owner.key, loc) if part) or "<block>"
    origin = (sources.lookup(dotted) if sources else None) or owner.source
    where = f"{origin}  " if origin else ""
    in_owner = f" in {owner.label}" if owner.label else ""
    if error["type"] == "missing":
        return f"{where}{dotted}: missing required key '{loc}'{in_owner}"
    if error["type"] == "extra_forbidden":
        fields = list(model_cls.model_fields) if len(error["loc"]) == 1 else []
        close = difflib.get_close_matches(str(error["loc"][-1]), fields, n=1)
        suggestion = f"; did you mean '{close[0]}'?" if close else ""
        return f"{where}{dotted}: unknown key '{loc}'{in_owner}{suggestion}"
    message = error["msg"]
    if ", got " in message:  # our validators' messages already show the value (masked)
        return f"{where}{dotted}: {message}"
    return f"{where}{dotted}: {message}, got {_shown(error)}"


_UNION_BRANCH = re.compile(r"^(str|int|float|bool|none|.*\[.*\])$")
"""The loc part pydantic adds for the branch of a union it tried (`base_url.list[str]`)."""


def _shown(error: ErrorDetails) -> str:
    """The offending value, masked when its key looks secret (a placeholder is shown as written:
    null, `<api_key>`, `MISSING` are no secrets, and '***' for a null misleads)."""
    value = error.get("input")
    if value is None:
        return "null"
    key = str(error["loc"][-1]) if error["loc"] else ""
    if is_secret_key(key):
        return repr(value) if is_placeholder_text(value) else repr(MASK)
    return repr(mask(value))  # a `user:password@` in a URL stays masked, placeholders or not


def _summary(problems: list[str], owner: _Owner, model_cls: type[BaseModel]) -> str:
    if len(problems) == 1:
        return problems[0]
    listing = "\n".join(f"  {problem}" for problem in problems)
    return f"{len(problems)} problems in {owner.label or model_cls.__name__}:\n{listing}"


def _hint(errors: list[ErrorDetails], owner: _Owner) -> str | None:
    missing = [".".join(str(part) for part in error["loc"]) for error in errors if error["type"] == "missing"]
    if not missing:
        return None
    where = f"the config file ({owner.source})" if owner.source else "the config file"
    if not owner.is_tree_key:
        return f"add {', '.join(missing)} to the block in {where}"
    flags = " ".join(f"++{owner.key}.{key}=..." for key in missing)
    return f"add it to {where} or on the command line: {flags}"
