"""The collection loop: a bounded queue feeding a fixed pool of workers; one rollout never ends a run.

    scan_input (validate every line, hash the file)      nothing has run yet: bad input -> exit 2
    find_agent_urls (+agent_urls or head server)          unknown agent -> exit 2
    open_run (lock, fingerprint, resume, torn tail)       different run -> exit 2, offers +overwrite
    <stem>_materialized_inputs.jsonl (every row as sent)  NeMo Gym's file (`materialized`)
    producer --(queue of 2 x workers)--> workers x min(num_samples_in_parallel, max_resident_rollout_tasks)
        (tasks in input order, each task's repeats together; round by round with interleave_repeats)
        worker: a rollout starts only while dispatch_budget_s allows (budget.py); else none is run
        (reads the input again; it changed since the check -> exit 2, naming it)
        worker: POST <agent>/run  (deadline, bounded attempts, backoff with jitter)
            ok     -> one os.write of one line to the output
            cannot connect, and the head lists the agent elsewhere now -> the same call there
            failed -> classify -> retry, or one line to the failures file
    close_run (rewrite failures file, write metrics and NeMo Gym's _aggregate_metrics.json)

The input is read twice as a stream and never held; memory is the queue, the rollouts in flight,
and ~9 bytes per (task, rollout) pair in the scoreboard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ng_cli.config.secrets import Redactor
from ng_cli.errors import UpstreamUnavailableError
from ng_cli.rollouts.agent_call import http_timeouts, post_run
from ng_cli.rollouts.budget import DispatchBudget
from ng_cli.rollouts.config import CollectConfig
from ng_cli.rollouts.discovery import find_agent_urls, listed_url
from ng_cli.rollouts.failures import FailureKind, classify
from ng_cli.rollouts.inputs import InputSummary, Task, scan_input
from ng_cli.rollouts.materialized import iter_jobs, run_body, write_materialized_inputs
from ng_cli.rollouts.progress import NullView, ProgressView, RunStats
from ng_cli.rollouts.results import to_output_line
from ng_cli.rollouts.run import CollectResult, RunFiles, close_run, open_run
from ng_cli.servers.http import HttpClient, RetryPolicy

__all__ = ["CollectResult", "collect_rollouts", "run_collection"]

logger = logging.getLogger("ng_cli.rollouts")

_TICK_S = 0.5
_Job = tuple[Task, int]


def run_collection(
    config: CollectConfig, *, view: ProgressView | None = None, redactor: Redactor | None = None
) -> CollectResult:
    """Collect every rollout the config asks for (synchronous entry point for the command)."""
    return asyncio.run(collect_rollouts(config, view=view or NullView(), redactor=redactor))


async def collect_rollouts(
    config: CollectConfig, *, view: ProgressView, redactor: Redactor | None = None
) -> CollectResult:
    """Validate, discover, resume, then run every missing (task, rollout) pair.

    `redactor` holds the composed config's secrets; they never reach the failures file."""
    summary = scan_input(
        config.input_jsonl_fpath,
        limit=config.limit,
        agent_name=config.agent_name,
        agent_map=config.agent_map,
        fan_out=config.fan_out,
    )
    http = HttpClient(
        timeouts=http_timeouts(config.rollout_timeout_s),
        max_connections=_or(config.global_aiohttp_connector_limit, config.num_samples_in_parallel + 16),
        max_connections_per_host=_or(config.global_aiohttp_connector_limit_per_host, 0),
    )
    try:
        urls = await find_agent_urls(http, config, summary)
        files = open_run(config, summary, redactor=redactor)
        collector = _Collector(config, files, http, urls, summary)
        try:
            write_materialized_inputs(config, summary, files.paths.materialized)
            await collector.run(iter_jobs(config, summary), view)
        finally:
            files.close()
        return close_run(config, files, collector.stats)
    finally:
        await http.close()


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


@dataclass
class _Collector:
    """The pool of workers of one run, and what they share."""

    config: CollectConfig
    files: RunFiles
    http: HttpClient
    agent_urls: dict[str, str]
    summary: InputSummary

    def __post_init__(self) -> None:
        self.stats = RunStats(total=self.files.scoreboard.total, already_done=self.files.scoreboard.done)
        self.retry = RetryPolicy(
            max_attempts=self.config.max_attempts,
            backoff_s=self.config.retry_backoff_s,
            max_backoff_s=self.config.retry_max_backoff_s,
        )
        self._logged_internal = False
        self.workers = min(
            self.config.num_samples_in_parallel,
            self.config.max_resident_rollout_tasks or self.config.num_samples_in_parallel,
        )
        self.budget = (
            DispatchBudget(self.config.dispatch_budget_s, margin_s=self.config.drain_margin_s)
            if self.config.dispatch_budget_s is not None
            else None
        )

    async def run(self, jobs: Iterator[_Job], view: ProgressView) -> None:
        queue: asyncio.Queue[_Job | None] = asyncio.Queue(maxsize=2 * self.workers)
        view.start()
        ticker = asyncio.create_task(self._tick(view))
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(self.workers):
                    group.create_task(self._worker(queue))
                group.create_task(self._produce(jobs, queue))
        except BaseExceptionGroup as group_error:
            # The producer or a worker raises only for a reason that must end the run (the input
            # changed, the output cannot be written); show that reason, not the group wrapper.
            raise group_error.exceptions[0] from None
        finally:
            ticker.cancel()
            view.stop(self.stats.snapshot(self.files.scoreboard.mean_reward()))

    async def _produce(self, jobs: Iterator[_Job], queue: asyncio.Queue[_Job | None]) -> None:
        scoreboard = self.files.scoreboard
        for task, rollout_index in jobs:
            if not scoreboard.is_done(task.index, rollout_index):
                await queue.put((task, rollout_index))
        for _ in range(self.workers):
            await queue.put(None)

    async def _worker(self, queue: asyncio.Queue[_Job | None]) -> None:
        while (job := await queue.get()) is not None:
            # As NeMo Gym: the budget is checked when a worker is free to start the rollout, not
            # when it was queued, so it sees the time really left.
            if self.budget is not None and not self.budget.allows_start():
                self.stats.drained += 1
                continue
            self.stats.in_flight += 1
            try:
                await self._rollout(*job)
            finally:
                self.stats.in_flight -= 1

    async def _rollout(self, task: Task, rollout_index: int) -> None:
        """Attempt one rollout until it succeeds, fails for good, or attempts run out."""
        # NeMo Gym's indices on the wire and in the files; the scoreboard's are this run's own.
        task_key, rollout_key = self.summary.external(task.index, rollout_index, self.config.num_repeats)
        row = run_body(self.config, task.row, task_key, rollout_key)
        for attempt in range(1, self.config.max_attempts + 1):
            self.stats.attempts += 1
            started = time.monotonic()
            try:
                answer = await self._post_run(task.agent, row)
                line, outcome = to_output_line(
                    row,
                    answer,
                    task_index=task_key,
                    rollout_index=rollout_key,
                    max_staleness=self.config.max_staleness,
                )
            except Exception as error:  # every failure of one rollout is data; cancellation is not caught
                failure = classify(error, attempt=attempt, task_index=task_key, rollout_index=rollout_key)
                self.stats.attempt_failed(failure)
                self._log_internal(failure.kind, error)
                if failure.is_retryable and attempt < self.config.max_attempts:
                    await asyncio.sleep(self.retry.delay_s(attempt))
                    continue
                self.files.failures.append(failure, agent=task.agent, input_line=task.line)
                self.files.scoreboard.record_failure(task.index, failure.kind.value)
                self.stats.rollout_failed(failure)
                return
            if self.budget is not None:
                self.budget.record(time.monotonic() - started)
            self.files.writer.write(line)
            self.files.scoreboard.record(replace(outcome, task_index=task.index, rollout_index=rollout_index))
            self.stats.rollout_succeeded(attempts=attempt, output_tokens=outcome.output_tokens)
            return

    async def _post_run(self, agent: str, row: dict[str, Any]) -> Any:
        """One attempt's POST /run. An agent that cannot be reached and that the head now lists at
        another address (restarted on another Ray node, its own node lost) is called there at once,
        as the same attempt: nothing is left at the old address to answer it. Agents given by
        +agent_urls stay where they were given."""
        for may_follow in (True, False):
            base = self.agent_urls[agent]
            try:
                return await post_run(self.http, f"{base}/run", row, timeout_s=self.config.rollout_timeout_s)
            except UpstreamUnavailableError:
                if not may_follow or agent in self.config.agent_urls:
                    raise
                moved_to = await listed_url(self.http, self.config, agent)
                if moved_to is None or moved_to == base:
                    raise
                if self.agent_urls[agent] == base:  # the first worker to see it says so
                    self.agent_urls[agent] = moved_to
                    logger.warning(
                        "agent '%s' moved: %s -> %s (listed by the head server)", agent, base, moved_to
                    )
        raise AssertionError("unreachable: the second try returns or raises")

    def _log_internal(self, kind: FailureKind, error: Exception) -> None:
        """A bug in the collector must not hide as a failure class: log its traceback once."""
        if kind is FailureKind.INTERNAL and not self._logged_internal:
            self._logged_internal = True
            logger.error("unexpected error in a rollout (a bug; please report it)", exc_info=error)

    async def _tick(self, view: ProgressView) -> None:
        while True:
            await asyncio.sleep(_TICK_S)
            view.update(self.stats.snapshot(self.files.scoreboard.mean_reward()))
