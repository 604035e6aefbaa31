"""`nemo_gym.rollout_collection`: the record keys and failure classes servers and agents stamp,
and the pieces of NeMo Gym's collector that a server drives its own collection with.

Servers import the names under which a rollout's record carries its failure (`gdpval`:
`NG_FAILURE_CLASS_KEY`, `NG_TERMINAL_KEY`) and the rule that decides whether a persisted failure
is retried on resume (`is_terminal_failure`). Those are a record format, given here, as are the
pure pieces gdpval's multistage orchestrator builds on, NeMo Gym's: `get_max_rollout_attempts`
(`NEMO_GYM_MAX_ROLLOUT_ATTEMPTS`), `DispatchLatencyTracker` (per-task latency and the adaptive
drain margin), `observed_elapsed`, `migrate_invalid_judge_main_rows` (a legacy invalid-judge row
moved from the output to the failures sidecar, durably, once), the collector's options
(`SharedRolloutCollectionConfig`, `RolloutCollectionConfig`: NeMo Gym's keys, defaults and
checks, `check_completion` included) and `_CompletedRollout`.

NeMo Gym's collection driver itself (`RolloutCollectionHelper.run_from_config`, `run_examples`,
`RolloutAggregationHelper`) is not here: our collector is `ng_collect_rollouts` (`ng_cli.rollouts`,
a layer above this one, docs/architecture.md), and a trainer's process gets NeMo Gym's driver
over it from `ng_cli.trainer_api`. Its record contract is ours, not NeMo Gym's: a `/run` that
answers 200 with a reward is a scored row even when it carries `_ng_failure_class` (masked,
counted in `coverage/*`), a failure record is typed (`kind`, `status`, `message`) rather than the
row with `_ng_failure_http_status`/`_ng_failure_response_body`, and a 5xx is retried. A server
that calls the driver from inside a server's process (gdpval's multistage orchestrator) is told so
by `RolloutCollectionHelper` (`NotImplementedError`, naming ng_collect_rollouts).
"""

from __future__ import annotations

import bisect
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ng_cli.nemo_gym_compat.api.deliverables import is_deliverable
from ng_cli.nemo_gym_compat.api.global_config import (
    ATTEMPT_INDEX_KEY_NAME,
    ROLLOUT_INDEX_KEY_NAME,
    TASK_INDEX_KEY_NAME,
)
from ng_cli.nemo_gym_compat.api.path_utils import failures_path_for, materialized_path_for

__all__ = [
    "AGENT_REQUEST_FAILED_FAILURE_CLASS",
    "AGENT_RUN_ERROR_FAILURE_CLASS",
    "ENVIRONMENT_SERVER_FAILURE_CLASS",
    "NG_DISPATCH_DRAINED_KEY",
    "NG_ELAPSED_KEY",
    "NG_ENVIRONMENT_SERVER_KEY",
    "NG_FAILURE_CLASS_KEY",
    "NG_NO_PERSIST_KEY",
    "NG_PERF_KEY",
    "NG_RESULT_TYPE_KEY",
    "NG_TASK_ID_KEY",
    "NG_TERMINAL_KEY",
    "NG_TRAJECTORY_KEY",
    "ROLLOUT_INDEX_KEY_NAME",
    "TASK_INDEX_KEY_NAME",
    "DispatchLatencyTracker",
    "SharedRolloutCollectionConfig",
    "get_max_rollout_attempts",
    "is_terminal_failure",
    "migrate_invalid_judge_main_rows",
    "observed_elapsed",
]
"""Not listed, though defined: `RolloutCollectionConfig` and `RolloutCollectionHelper`, which a
trainer's `nemo_gym.rollout_collection` (`ng_cli.trainer_api`, which star-imports this module)
gives as ours: options and driver over `ng_collect_rollouts`."""

LOGGER = logging.getLogger(__name__)

NG_FAILURE_CLASS_KEY = "_ng_failure_class"
NG_NO_PERSIST_KEY = "_ng_no_persist"
NG_DISPATCH_DRAINED_KEY = "_ng_dispatch_drained"
NG_TERMINAL_KEY = "_ng_failure_terminal"
NG_ENVIRONMENT_SERVER_KEY = "_ng_environment_server"
NG_RESULT_TYPE_KEY = "_ng_result_type"
NG_TASK_ID_KEY = "_ng_task_id"
NG_TRAJECTORY_KEY = "ng_trajectory"
NG_PERF_KEY = "ng_perf"
NG_ELAPSED_KEY = "elapsed_seconds"
AGENT_REQUEST_FAILED_FAILURE_CLASS = "agent_request_failed"
AGENT_RUN_ERROR_FAILURE_CLASS = "agent_run_error"
ENVIRONMENT_SERVER_FAILURE_CLASS = "environment_server_failed"

_RETRIED_WHEN_ASKED = frozenset(
    {"timeout_exceeded", "reference_missing", "eval_missing", "transport_ineligible"}
)
"""Failure classes a resume may retry under `retry_terminal_timeouts` (a per-attempt timeout, and
environment faults that can be repaired between runs)."""
_ALWAYS_TERMINAL = frozenset({"skipped"})


def is_terminal_failure(record: Mapping[str, Any], *, retry_terminal_timeouts: bool = False) -> bool:
    """Whether a persisted failure stays failed on resume: stamped `_ng_failure_terminal`; with
    `retry_terminal_timeouts`, a timeout or a repairable environment fault is retried anyway and
    a skipped sample never is."""
    if retry_terminal_timeouts:
        failure_class = record.get(NG_FAILURE_CLASS_KEY)
        if failure_class in _RETRIED_WHEN_ASKED:
            return False
        if failure_class in _ALWAYS_TERMINAL:
            return True
    return bool(record.get(NG_TERMINAL_KEY))


_DEFAULT_MAX_ROLLOUT_ATTEMPTS = 3
_MIGRATED_INVALID_JUDGE_KEY = "_ng_migrated_invalid_judge_response"


def get_max_rollout_attempts() -> int:
    """`NEMO_GYM_MAX_ROLLOUT_ATTEMPTS` (a positive int), else 3; a bad value is warned about and
    the default used (NeMo Gym's)."""
    raw = os.environ.get("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS")
    if not raw:
        return _DEFAULT_MAX_ROLLOUT_ATTEMPTS
    try:
        attempts = int(raw)
    except ValueError:
        attempts = 0
    if attempts < 1:
        LOGGER.warning(
            "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS=%r is not a positive integer; using %d",
            raw,
            _DEFAULT_MAX_ROLLOUT_ATTEMPTS,
        )
        return _DEFAULT_MAX_ROLLOUT_ATTEMPTS
    return attempts


_get_max_rollout_attempts = get_max_rollout_attempts  # NeMo Gym's older name


class DispatchLatencyTracker:
    """Per-task durations the dispatcher saw, and the drain margin they give (NeMo Gym's).

    The margin is the seconds a task needs to be worth starting before a dispatch budget runs out:
    the configured one when set, else this run's p75 once 5 tasks have finished."""

    def __init__(self) -> None:
        self._durations: list[float] = []  # sorted: a quantile is read before every dispatch
        self._drained = 0

    def record(self, seconds: float) -> None:
        if seconds > 0:
            bisect.insort(self._durations, seconds)

    def record_drained(self) -> None:
        self._drained += 1

    @property
    def drained(self) -> int:
        return self._drained

    def quantile(self, q: float) -> float | None:
        """Linear interpolation between the two nearest durations; None before any."""
        if not self._durations:
            return None
        position = (len(self._durations) - 1) * q
        low = int(position)
        high = min(low + 1, len(self._durations) - 1)
        fraction = position - low
        return self._durations[low] * (1 - fraction) + self._durations[high] * fraction

    def drain_margin(self, configured: float | None) -> float | None:
        if configured is not None:
            return configured
        if len(self._durations) < 5:
            return None
        return self.quantile(0.75)

    def summary(self) -> str:
        if not self._durations:
            lines = ["No completed rollouts to report latency for."]
        else:
            minutes = {q: (self.quantile(q) or 0.0) / 60 for q in (0.5, 0.9, 0.99)}
            lines = [
                f"Per-task latency over {len(self._durations)} completed rollout(s): "
                f"median {minutes[0.5]:.1f} min, p90 {minutes[0.9]:.1f} min, "
                f"p99 {minutes[0.99]:.1f} min, max {max(self._durations) / 60:.1f} min",
                f"Task-time delivered: {sum(self._durations) / 3600:.1f} task-hours",
            ]
        if self._drained:
            lines.append(
                f"Drained (not dispatched, no time left in the budget): {self._drained}. "
                "These wrote no row and will be re-dispatched on resume."
            )
        return "\n".join(lines)


def observed_elapsed(record: Mapping[str, Any]) -> float | None:
    """A rollout's wall time from its row: `elapsed_seconds`, else its response's metadata's; a
    positive number, else None."""
    response = record.get("response")
    metadata = response.get("metadata") if isinstance(response, Mapping) else None
    candidates = (record.get(NG_ELAPSED_KEY), (metadata or {}).get(NG_ELAPSED_KEY))
    for candidate in candidates:
        if candidate is None:
            continue
        try:
            value = float(candidate)
        except (TypeError, ValueError):
            continue
        if value > 0:
            return value
    return None


def migrate_invalid_judge_main_rows(output_fpath: Path) -> int:
    """Move rows flagged `invalid_judge_response` from the output to its failures sidecar as
    retryable `judge_invalid` attempts (NeMo Gym's, for environments that opt in with
    `retry_invalid_judge_responses`); returns how many the output held.

    Sidecar first, then the output rewritten atomically: a crash in between leaves the retry
    recorded and the row still in the output, and a marker keyed by (stage, task, rollout,
    attempt) keeps a second run from migrating it twice. A row whose `deliverables_dir` still
    holds a deliverable is marked `reuse_cached_deliverable` (judged again, not regenerated)."""
    if not output_fpath.exists():
        return 0
    lines = [line.strip() for line in output_fpath.read_bytes().splitlines() if line.strip()]
    rows = [orjson.loads(line) for line in lines]
    invalid = sum(1 for row in rows if row.get("invalid_judge_response"))
    if not invalid:
        return 0
    failures_fpath = failures_path_for(output_fpath)
    failures_fpath.parent.mkdir(parents=True, exist_ok=True)
    migrated_keys: set[tuple[Any, ...]] = set()
    if failures_fpath.exists():
        for line in failures_fpath.read_bytes().splitlines():
            if line.strip():
                earlier = orjson.loads(line)
                if earlier.get(_MIGRATED_INVALID_JUDGE_KEY):
                    migrated_keys.add(_migration_key(earlier))
    mode = output_fpath.stat().st_mode & 0o7777
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, before the replace
        mode="wb", dir=output_fpath.parent, prefix=f".{output_fpath.name}.migrate-", delete=False
    )
    temp_path = Path(handle.name)
    try:
        with handle, failures_fpath.open("ab") as failures:
            for line, row in zip(lines, rows, strict=True):
                if not row.get("invalid_judge_response"):
                    handle.write(line + b"\n")
                    continue
                key = _migration_key(row)
                if key in migrated_keys:
                    continue
                failures.write(orjson.dumps(_as_judge_retry(row)) + b"\n")
                migrated_keys.add(key)
            failures.flush()
            os.fsync(failures.fileno())  # every retry durable before its success leaves the output
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_path, mode)
        os.replace(temp_path, output_fpath)
    finally:
        temp_path.unlink(missing_ok=True)
    return invalid


def _migration_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        int(row.get("stage_index", 0) or 0),
        row.get(TASK_INDEX_KEY_NAME),
        row.get(ROLLOUT_INDEX_KEY_NAME),
        int(row.get(ATTEMPT_INDEX_KEY_NAME, 0) or 0),
    )


def _as_judge_retry(row: Mapping[str, Any]) -> dict[str, Any]:
    migrated = dict(row)
    migrated[NG_FAILURE_CLASS_KEY] = migrated.get(NG_FAILURE_CLASS_KEY) or "judge_invalid"
    migrated.pop(NG_TERMINAL_KEY, None)
    folder = migrated.get("deliverables_dir")
    try:
        cached = (
            isinstance(folder, str)
            and bool(folder)
            and Path(folder).is_dir()
            and any(map(is_deliverable, Path(folder).iterdir()))
        )
    except OSError:
        cached = False
    if cached:
        migrated["reuse_cached_deliverable"] = True
    else:
        migrated.pop("reuse_cached_deliverable", None)
    migrated[_MIGRATED_INVALID_JUDGE_KEY] = True
    return migrated


class SharedRolloutCollectionConfig(BaseModel):
    """NeMo Gym's options shared by its collectors (keys, defaults and bounds as 0.7.0's)."""

    model_config = ConfigDict(extra="allow")

    output_jsonl_fpath: str
    require_complete: bool = False
    num_samples_in_parallel: int | None = Field(default=None, gt=0)
    max_resident_rollout_tasks: int | None = Field(default=None, ge=1)
    retain_results_in_memory: bool = True
    responses_create_params: dict[str, Any] = Field(default_factory=dict)
    disable_aggregation: bool = False
    disable_health_check: bool = False
    health_check_workers: int | None = Field(default=None, ge=1)
    health_check_ignored_checks: list[str] = Field(default_factory=list)
    count_failure_classes_as_zero: list[str] = Field(default_factory=list)
    count_missing_rollouts_as_zero: bool = False
    route_failures_to_sidecar: bool = False
    rollout_collection_driver: str | None = None
    environment_routing_mode: Literal["agent", "legacy", "taskset"] = "agent"
    environment_server_name: str | None = None
    environment_server_routes: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def validate_environment_routing(self) -> Self:
        if self.environment_routing_mode == "legacy" and self.environment_server_name is None:
            raise ValueError("environment_server_name is required when environment_routing_mode=legacy")
        if self.environment_routing_mode == "taskset" and not self.environment_server_routes:
            raise ValueError("environment_server_routes are required when environment_routing_mode=taskset")
        return self

    def check_completion(self, *, expected: int, results: list[dict[str, Any]]) -> None:
        """With `require_complete`: RuntimeError unless `expected` distinct (stage, task, rollout)
        rows completed (no failure class, persisted)."""
        if not self.require_complete:
            return
        completed = len(
            {
                (row.get("stage_index"), row[TASK_INDEX_KEY_NAME], row[ROLLOUT_INDEX_KEY_NAME])
                for row in results
                if row.get(NG_FAILURE_CLASS_KEY) is None and not row.get(NG_NO_PERSIST_KEY)
            }
        )
        if completed < expected:
            raise RuntimeError(
                f"EVAL FAILED: {completed}/{expected} samples completed. "
                f"Partial artifacts retained at {self.output_jsonl_fpath}."
            )


class RolloutCollectionConfig(SharedRolloutCollectionConfig):
    """NeMo Gym's `ng_collect_rollouts` options (0.7.0's keys, defaults and checks); our
    `ng_collect_rollouts` reads the same keys from a command line or a config file."""

    agent_name: str | None = None
    agent_map: dict[str, str] | None = None
    fan_out: dict[str, list[str]] | None = None
    input_jsonl_fpath: str
    limit: int | None = None
    num_repeats: int | dict[str, int] = 1
    num_repeats_add_seed: bool = False
    interleave_repeats: bool = False
    resume_from_cache: bool = False
    prompt_config: str | None = None
    skills: dict[str, Any] | None = None
    dispatch_budget_s: float | None = Field(default=None, ge=0)
    drain_margin_s: float | None = Field(default=None, ge=0)
    dispatch_longest_first: bool = False
    retry_terminal_timeouts: bool = False
    retry_invalid_judge_responses: bool = False

    @field_validator("num_repeats", mode="before")
    @classmethod
    def _null_num_repeats(cls, value: Any) -> Any:
        return 1 if value is None else value

    @model_validator(mode="after")
    def _agent_name_is_the_default_route(self) -> Self:
        if self.agent_name is None:
            return self
        default = (self.agent_map or {}).get("_default")
        if default is not None and default != self.agent_name:
            raise ValueError(
                f"agent_name={self.agent_name!r} conflicts with agent_map._default={default!r}. "
                "Set only one of them."
            )
        self.agent_map = {**(self.agent_map or {}), "_default": self.agent_name}
        return self

    @model_validator(mode="after")
    def _checks(self) -> Self:
        repeats = self.num_repeats
        bad = (
            {"num_repeats": repeats}
            if isinstance(repeats, int) and repeats < 1
            else {k: v for k, v in repeats.items() if v < 1}
            if isinstance(repeats, dict)
            else {}
        )
        if bad:
            raise ValueError(f"num_repeats must be >= 1, got {bad}")
        if self.dispatch_budget_s is not None and self.num_samples_in_parallel is None:
            raise ValueError(
                "dispatch_budget_s requires a finite positive num_samples_in_parallel; "
                "unbounded dispatch can POST the entire queue before the budget is re-checked"
            )
        for key, agents in (self.fan_out or {}).items():
            if not agents:
                raise ValueError(
                    f"fan_out[{key!r}] is an empty list, which would silently drop every matching row"
                )
            twice = sorted({agent for agent in agents if agents.count(agent) > 1})
            if twice:
                raise ValueError(f"fan_out[{key!r}] lists the same agent more than once: {twice}")
        return self

    @property
    def materialized_jsonl_fpath(self) -> Path:
        return materialized_path_for(Path(self.output_jsonl_fpath))


@dataclass
class _CompletedRollout:
    """One finished rollout as NeMo Gym's dispatcher yields it."""

    row: dict[str, Any]
    result: dict[str, Any]
    rollout_latency_ms: float | None = None


def _attach_ng_perf(
    result: dict[str, Any], *, observability_enabled: bool, rollout_latency_ms: float | None = None
) -> None:
    """NeMo Gym adds `ng_perf` from its model-call captures when observability is on; there are
    none here (the rows carry our own usage and timings), so the result is left as it is."""
    if observability_enabled:
        LOGGER.debug("ng_perf not assembled: NeMo Gym's model-call observability is not offered here")


_DRIVER_HINT = (
    "NeMo Gym's collection driver is not offered inside a server here: collect with "
    "ng_collect_rollouts (the same options), or from a trainer with ng_cli.trainer_api"
)


class RolloutCollectionHelper(BaseModel):
    """NeMo Gym's collection driver, refused in a server's process (see the module doc)."""

    async def run_from_config(self, config: RolloutCollectionConfig) -> list[dict[str, Any]]:
        raise NotImplementedError(f"RolloutCollectionHelper.run_from_config: {_DRIVER_HINT}")

    def run_examples(self, examples: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"RolloutCollectionHelper.run_examples: {_DRIVER_HINT}")
