"""The options of `ng_collect_rollouts` (`CollectConfig`) and `ng_e2e_collect_rollouts` (`E2EOptions`).

The commands take Hydra-style overrides like every other command (`+num_repeats=4`), so these
keys can also live in a YAML file named by `+config_paths=[...]`; they are read through
`ng_cli.config.command_options` (unknown keys refused, NeMo Gym options we do not run refused by
name). The rest of the tree (server instances) is the stack's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, StrictInt, field_validator, model_validator

from ng_cli.config.command_options import CommandOptions, command_options
from ng_cli.config.compose import ComposedConfig
from ng_cli.config.http_client_options import HttpClientOptions
from ng_cli.config.nemo_gym_options import not_offered_table
from ng_cli.config.run_options import RunOptions

__all__ = [
    "DEFAULT_HEAD_SERVER_URL",
    "NOT_OFFERED",
    "STACK_FILE_COMMANDS",
    "CollectConfig",
    "CollectOptions",
    "E2EOptions",
    "collect_config_from",
]

DEFAULT_HEAD_SERVER_URL = "http://127.0.0.1:11000"

_NO_HEALTH = "NeMo Gym's rollout health checks and their report; there are none here"
NOT_OFFERED = not_offered_table(
    {
        "input_glob": (
            "is ng_aggregate_rollouts' option (the shards to aggregate), not the collector's",
            "ng_aggregate_rollouts +input_glob='results/rollouts-*.jsonl' +output_jsonl_fpath=results/rollouts.jsonl",
        ),
        "prompt_config": (
            "builds each row's input from a prompt template at rollout time; here rows are sent as written",
            "render the prompts first: ng_materialize_prompts +input_jsonl_fpath=raw.jsonl "
            "+prompt_config=prompt.yaml +output_jsonl_fpath=rows.jsonl, then collect from rows.jsonl",
        ),
        "disable_aggregation": (
            "skips the aggregate metrics; here they are always written (<stem>_aggregate_metrics.json)",
            "leave it out; ng_aggregate_rollouts re-aggregates shards",
        ),
        "health_check_workers": (f"sizes {_NO_HEALTH}", "leave it out"),
        "health_check_ignored_checks": (f"filters {_NO_HEALTH}", "leave it out"),
        "rollout_collection_driver": (
            "plugs in a custom collection procedure; here there is one collector",
            "leave it out",
        ),
        "skills": ("mounts Agent Skills for the agent; not part of this project", "leave it out"),
        "dispatch_longest_first": (
            "orders a resumed run by recorded task durations; not recorded here",
            "leave it out",
        ),
        "retry_invalid_judge_responses": (
            "moves rows with invalid judge responses back to the failures; judge failures are failures here",
            "run the same command again",
        ),
        "upload_rollouts": (
            "uploads rollouts to NeMo Gym's exporters (W&B, MLflow): network beyond the package registries",
            "upload the output file yourself",
        ),
        "upload_rollouts_to_wandb": (
            "uploads rollouts to W&B: network beyond the package registries",
            "upload the output file yourself",
        ),
    }
)
"""NeMo Gym collector options not offered here: key -> why, and what to do instead."""


class CollectOptions(CommandOptions, HttpClientOptions):
    """The collector's options but its input: `ng_collect_rollouts`' and `ng_e2e_collect_rollouts`'.

    With NeMo Gym's `global_aiohttp_connector_limit*` (`HttpClientOptions`), which size the
    collector's connection pool as they size every server's."""

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
    """Where `ng_run`'s head server answers `GET /servers` (else from `head_server`, else this)."""
    head_server: dict[str, Any] | None = None
    """{host, port} of the head server, as ng_run was given it (read for `head_server_url`'s default)."""
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
    max_staleness: StrictInt | None = Field(default=None, ge=0)
    """Flag rows whose calls' newest and oldest weight versions differ by more than this (`stale: true`)."""

    # NeMo Gym 0.7.0's collector keys (`RolloutCollectionConfig`), with its meaning (docs/compat.md).
    fan_out: dict[str, list[str]] | None = None
    """Run each row whose `agent_ref.name` is a key once per listed agent ({row_agent: [agent_a,
    agent_b]}); the copies are numbered as more repeats of the row's task (num_repeats per agent)."""
    resume_from_cache: bool | None = None
    """true: skip the rollouts the output already holds (what a run here does anyway); false: start
    over, as +overwrite=true (NeMo Gym's default, which clears the output)."""
    interleave_repeats: bool = False
    """Start the repeats round by round (abcabc) instead of each task's back to back (aabbcc)."""
    max_resident_rollout_tasks: int | None = Field(default=None, ge=1)
    """At most this many rollouts held at once (in flight); with num_samples_in_parallel, the smaller wins."""
    retain_results_in_memory: bool = True
    """Accepted; results never stay in memory here: each is written as it finishes."""
    dispatch_budget_s: float | None = Field(default=None, ge=0)
    """Seconds from the start during which new rollouts may start; later ones are not started (no
    row, no failure), the run keeps what finished, and the same command resumes them."""
    drain_margin_s: float | None = Field(default=None, ge=0)
    """With dispatch_budget_s: start no rollout with less than this left (unset: the run's p75
    rollout duration once 5 have finished)."""
    count_failure_classes_as_zero: list[str] = Field(default_factory=list)
    """Failed rollouts of these classes count as reward 0 in `_aggregate_metrics.json` (NeMo Gym's
    `agent_run_error`, `agent_request_failed`, or a failure kind of this collector, e.g. `timeout`)."""
    count_missing_rollouts_as_zero: bool = False
    """Rollouts with neither a row nor a failure (not started, cut off) count as reward 0 in
    `_aggregate_metrics.json`."""
    require_complete: bool = False
    """Accepted; here the exit code is 1 whenever a rollout has no reward (failed or not started)."""
    route_failures_to_sidecar: bool = False
    """Accepted; here a failed rollout always goes to `<stem>_failures.jsonl` and the run goes on."""
    retry_terminal_timeouts: bool = False
    """Accepted; here a resume retries every failed rollout, timeouts included."""
    disable_health_check: bool = False
    """Accepted; NeMo Gym's rollout health checks do not exist here."""

    not_offered = NOT_OFFERED

    @model_validator(mode="before")
    @classmethod
    def _head_url_default(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("head_server_url") is None and data.get("head_server"):
            return {**data, "head_server_url": _head_url_from(data["head_server"])}
        return data

    @property
    def starts_over(self) -> bool:
        """Whether the run deletes an earlier run's files first (+overwrite, or resume_from_cache=false)."""
        return self.overwrite or self.resume_from_cache is False

    @model_validator(mode="after")
    def _resume_or_start_over(self) -> Self:
        if self.overwrite and self.resume_from_cache:
            raise ValueError(
                "overwrite=true starts over and resume_from_cache=true resumes; set only one of them"
            )
        return self

    @field_validator("fan_out")
    @classmethod
    def _fan_out_lists(cls, value: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        for key, agents in (value or {}).items():
            if not agents:
                raise ValueError(
                    f"fan_out.{key} is an empty list: every matching row would be dropped; list an agent"
                )
            twice = sorted({agent for agent in agents if agents.count(agent) > 1})
            if twice:
                raise ValueError(
                    f"fan_out.{key} lists {', '.join(twice)} twice; use num_repeats for repetition"
                )
        return value

    @model_validator(mode="after")
    def _one_default_agent(self) -> Self:
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


class CollectConfig(CollectOptions):
    """What to collect, from which agent, how hard to try, and where to write it (`ng_collect_rollouts`)."""

    input_jsonl_fpath: Path
    """Input rows (JSONL), each with a `responses_create_params` object."""


class E2EOptions(CollectOptions):
    """`ng_e2e_collect_rollouts`: the collector's options, the split of the config's datasets as its
    input, and the stack's `ray` block (the stack starts as ng_run starts it)."""

    split: Literal["example", "validation", "train"]
    """Which datasets of the config's agents to collect: every one of this type."""
    ray: dict[str, Any] | str | None = None
    """The Ray cluster to start the stack on, as for ng_run (docs/ray.md)."""
    data_source: Literal["gitlab", "huggingface"] = "huggingface"
    """Accepted (NeMo Gym's download source for a missing dataset); nothing is downloaded here: a
    dataset's file must be at its jsonl_fpath."""

    not_offered = not_offered_table(
        {
            **{key: (value.why, value.instead) for key, value in NOT_OFFERED.items()},
            "input_jsonl_fpath": (
                "names the input file; here the input is the config's datasets of +split",
                "to collect from a file of your own, start the stack with ng_run and use ng_collect_rollouts",
            ),
            "reuse_existing_data_preparation": (
                "reuses a previous collation; here the split is collated again on every run (it is cheap, and "
                "the collector's fingerprint check sees the same input)",
                "leave it out",
            ),
        }
    )


def _head_url_from(block: Any) -> str:
    """`http://host:port` from the stack's `head_server` block, or the default."""
    if not isinstance(block, Mapping) or not block.get("port"):
        return DEFAULT_HEAD_SERVER_URL
    host = str(block.get("host") or "127.0.0.1")
    host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return f"http://{host}:{block['port']}"


STACK_FILE_COMMANDS: dict[str, type[CommandOptions]] = {
    "ng_run": RunOptions,
    "ng_collect_rollouts": CollectConfig,
    "ng_e2e_collect_rollouts": E2EOptions,
}
"""Commands that read the same config files (a stack, and what to collect from it): each accepts the
others' keys when a file sets them (`command_options`' `shared`)."""

_EXAMPLE = "ng_collect_rollouts +agent_name=<agent> +input_jsonl_fpath=in.jsonl +output_jsonl_fpath=out.jsonl"


def collect_config_from(composed: ComposedConfig) -> CollectConfig:
    """ng_collect_rollouts' options; ng_run's and ng_e2e_collect_rollouts' keys are accepted from the
    config files the three share."""
    return command_options(
        composed,
        CollectConfig,
        command="ng_collect_rollouts",
        asks={
            "input_jsonl_fpath": ("which rows to collect? (input_jsonl_fpath, output_jsonl_fpath)", _EXAMPLE),
            "output_jsonl_fpath": ("where do the rollouts go? (output_jsonl_fpath)", _EXAMPLE),
        },
        shared=STACK_FILE_COMMANDS,
    )
