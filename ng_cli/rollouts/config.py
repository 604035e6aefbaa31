"""`CollectConfig`: the options of `ng_collect_rollouts`, read from the composed config tree.

The command takes Hydra-style overrides like every other command (`+num_repeats=4`), so these
keys can also live in a YAML file named by `+config_paths=[...]`. Only the keys below are read;
the rest of the tree (server instances, `head_server`) is the stack's.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ng_cli.config.command_options import refuse_non_finite
from ng_cli.config.compose import ComposedConfig
from ng_cli.config.sources import COMMAND_LINE
from ng_cli.errors import ConfigError

__all__ = ["COLLECT_OPTIONS", "DEFAULT_HEAD_SERVER_URL", "CollectConfig", "collect_config_from"]

DEFAULT_HEAD_SERVER_URL = "http://127.0.0.1:11000"


class CollectConfig(BaseModel):
    """What to collect, from which agent, how hard to try, and where to write it."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    input_jsonl_fpath: Path
    """Input rows (JSONL), each with a `responses_create_params` object."""
    output_jsonl_fpath: Path
    """Where scored rollouts go; `_failures.jsonl`, `_fingerprint.json`, `_metrics.json` sit beside it."""
    agent_name: str | None = None
    """The agent instance to run every row with; without it, each row's `agent_ref` names one.
    (NeMo Gym's shorthand for `agent_map: {_default: <agent_name>}`.)"""
    agent_map: dict[str, str] = Field(default_factory=dict)
    """Re-routing by the row's `agent_ref.name` ({old_agent: new_agent}); `_default` applies to
    every row with no entry of its own, rows without `agent_ref` included (NeMo Gym's option)."""
    limit: int | None = Field(default=None, ge=1)
    """Use only the first `limit` rows of the input."""
    num_repeats: int = Field(default=1, ge=1)
    """Rollouts per row (k for pass@k / mean@k)."""
    num_repeats_add_seed: bool = False
    """Repeat i of a row sends `seed: i` to the model, so a collection can be repeated exactly."""
    num_samples_in_parallel: int = Field(default=64, ge=1, le=100_000)
    """Rollouts in flight at once (the size of the worker pool)."""
    responses_create_params: dict[str, Any] = Field(default_factory=dict)
    """Merged on top of every row's `responses_create_params` (e.g. `temperature`)."""
    rollout_timeout_s: float = Field(default=900.0, gt=0)
    """Deadline for one attempt of one rollout (the agent's whole `/run`)."""
    max_attempts: int = Field(default=3, ge=1, le=100)
    """Attempts per rollout before it goes to the failures file (retryable failures only)."""
    retry_backoff_s: float = Field(default=1.0, ge=0)
    """Base of the exponential backoff between attempts (full jitter)."""
    retry_max_backoff_s: float = Field(default=30.0, ge=0)
    """Longest sleep between two attempts."""
    overwrite: bool = False
    """Start fresh: delete the output, failures and metrics files first."""
    head_server_url: str = DEFAULT_HEAD_SERVER_URL
    """Where `ng_run`'s head server answers `GET /servers`."""
    agent_urls: dict[str, str] = Field(default_factory=dict)
    """Agent name -> base URL, used instead of asking the head server (scripts, tests)."""
    pass_threshold: float | None = None
    """A rollout passes when reward >= this; without it, when reward > 0."""
    ready_timeout_s: float = Field(default=30.0, ge=0)
    """How long to wait for an agent the head server lists as not ready yet."""
    progress_interval_s: float = Field(default=5.0, gt=0)
    """Seconds between progress lines when stderr is not a terminal."""
    report: bool = False
    """At the end, write `<output stem>_report.html` (ng_report) beside the output."""
    max_staleness: int | None = Field(default=None, ge=0)
    """Flag rows whose model calls span more than this many weight updates (`stale: true`)."""

    @model_validator(mode="after")
    def _one_default_agent(self) -> CollectConfig:
        default = self.agent_map.get("_default")
        if self.agent_name is not None and default is not None and default != self.agent_name:
            raise ValueError(
                f"agent_name={self.agent_name!r} conflicts with agent_map._default={default!r}; set only one of them"
            )
        return self

    @field_validator("head_server_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"expected an http(s) URL, got {value!r}")
        return value.rstrip("/")

    @field_validator("agent_urls")
    @classmethod
    def _http_urls(cls, value: dict[str, str]) -> dict[str, str]:
        for name, url in value.items():
            if not str(url).startswith(("http://", "https://")):
                raise ValueError(f"agent_urls.{name}: expected an http(s) URL, got {url!r}")
        return {name: str(url).rstrip("/") for name, url in value.items()}


_FIELDS = tuple(CollectConfig.model_fields)
COLLECT_OPTIONS = frozenset(_FIELDS)
"""The top-level keys ng_collect_rollouts reads (other commands accept them in shared files)."""
_STACK_KEYS = frozenset({"head_server", "config_paths", "dotenv_path", "verbose", "dry_run", "ready_file"})
"""Top-level keys other commands own; never mistaken for a misspelt collector option."""


NOT_OFFERED = {
    "fan_out": (
        "runs a row once per listed agent, numbering the copies as more repeats of one task; here a "
        "task runs on one agent",
        "collect once per agent, each into its own output: +agent_name=<agent> +output_jsonl_fpath=<agent>.jsonl",
    ),
    "input_glob": (
        "is ng_aggregate_rollouts' option (the shards to aggregate), not the collector's",
        "ng_aggregate_rollouts +input_glob='results/rollouts-*.jsonl' +output_jsonl_fpath=results/rollouts.jsonl",
    ),
    "prompt_config": (
        "builds each row's input from a prompt template at rollout time; here rows are sent as written",
        "render the prompts first: ng_materialize_prompts +input_jsonl_fpath=raw.jsonl "
        "+prompt_config=prompt.yaml +output_jsonl_fpath=rows.jsonl, then collect from rows.jsonl",
    ),
}
"""NeMo Gym collector options not offered here: key -> (why, what to do instead)."""


def collect_config_from(composed: ComposedConfig) -> CollectConfig:
    """Pick the collection keys out of the composed tree; a bad value is a ConfigError naming it."""
    _refuse_not_offered(composed)
    _reject_near_misses(composed)
    values = {key: composed.tree[key] for key in _FIELDS if composed.tree.get(key) is not None}
    refuse_non_finite(values, composed.sources)
    if "head_server_url" not in values:
        values["head_server_url"] = _head_url_from(composed.get("head_server"))
    try:
        return CollectConfig.model_validate(values)
    except ValidationError as exc:
        raise _config_error(exc, composed) from exc


def _head_url_from(block: Any) -> str:
    """`http://host:port` from the stack's `head_server` block, or the default."""
    if not isinstance(block, Mapping) or not block.get("port"):
        return DEFAULT_HEAD_SERVER_URL
    host = str(block.get("host") or "127.0.0.1")
    host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return f"http://{host}:{block['port']}"


def _refuse_not_offered(composed: ComposedConfig) -> None:
    """A NeMo Gym option we do not run is refused by name, never ignored."""
    for key, (why, instead) in NOT_OFFERED.items():
        if key in composed.tree:
            raise ConfigError(
                f"{_origin(composed, key)}  {key}: not offered by ng_collect_rollouts: NeMo Gym's +{key} {why}",
                hint=instead,
            )


def _reject_near_misses(composed: ComposedConfig) -> None:
    """`+num_repeat=4` must not be ignored silently: a top-level key close to one of ours is an error."""
    for key in composed.tree:
        if key in _FIELDS or key in _STACK_KEYS or key in composed.instances:
            continue
        close = difflib.get_close_matches(key, _FIELDS, n=1, cutoff=0.8)
        if close:
            where = _origin(composed, key)
            raise ConfigError(f"{where}  {key}: unknown option", hint=f"did you mean +{close[0]}=...?")


def _origin(composed: ComposedConfig, key: str) -> str:
    """Where a key (or, for a dict, its first child) was set."""
    found = composed.sources.lookup(key)
    if found:
        return found
    children = (origin for dotted, origin in composed.sources.items() if dotted.startswith(key + "."))
    return next(children, COMMAND_LINE)


def _config_error(exc: ValidationError, composed: ComposedConfig) -> ConfigError:
    problems = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "?"
        where = _origin(composed, key)
        value = repr(error.get("input"))
        shown = "" if error["type"] == "missing" or value in error["msg"] else f", got {value}"
        problems.append(f"{where}  {key}: {error['msg']}{shown}")
    missing = [p for p in problems if "Field required" in p]
    hint = (
        "ng_collect_rollouts +agent_name=<agent> +input_jsonl_fpath=in.jsonl +output_jsonl_fpath=out.jsonl"
        if missing
        else None
    )
    return ConfigError("\n".join(problems), hint=hint)
