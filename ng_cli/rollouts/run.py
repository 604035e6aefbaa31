"""The files of one run: opened before any rollout (fresh, or resumed), closed into a result.

`open_run` takes the output's lock, then either starts fresh (`+overwrite=true`) or checks the
fingerprint and reads back what an earlier run wrote (repairing a torn last line). `close_run`
rewrites the failures file to what still fails and writes `<output stem>_metrics.json` and NeMo
Gym's `<output stem>_aggregate_metrics.json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from ng_cli.config.secrets import Redactor
from ng_cli.errors import ConfigError, DataError
from ng_cli.outputs import write_bytes_atomically
from ng_cli.rollouts.config import CollectConfig
from ng_cli.rollouts.counted_zeros import counted_zeros
from ng_cli.rollouts.failures import FailureLog, read_failures
from ng_cli.rollouts.inputs import InputSummary
from ng_cli.rollouts.materialized import read_rows, write_aggregate_metrics
from ng_cli.rollouts.metric_hooks import MetricHooks, hooks_by_agent
from ng_cli.rollouts.metrics import Scoreboard
from ng_cli.rollouts.progress import RunStats
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY, ResultWriter, read_results, repair_torn_tail
from ng_cli.rollouts.resume import (
    Fingerprint,
    OutputPaths,
    check_resumable,
    refuse_writing_input,
    write_fingerprint,
)

__all__ = ["CollectResult", "RunFiles", "close_run", "open_run"]


@dataclass
class RunFiles:
    """The open output and failures files of a run, and the scoreboard behind them."""

    paths: OutputPaths
    writer: ResultWriter
    failures: FailureLog
    scoreboard: Scoreboard
    resumed: int = 0
    """Rollouts an earlier run had already written."""
    retrying_failed: int = 0
    """Rollouts an earlier run recorded as failed, run again now."""
    notes: list[str] = field(default_factory=list)
    """Things the user should hear about (a repaired torn line, duplicates)."""

    def close(self) -> None:
        self.writer.close()
        self.failures.close()


@dataclass(frozen=True)
class CollectResult:
    """What a finished run produced; the command renders it and exits with `exit_code`."""

    paths: OutputPaths
    metrics: dict[str, Any]
    notes: list[str]
    succeeded: int
    failed: int
    total: int

    @property
    def not_started(self) -> int:
        """Rollouts with neither a reward nor a failure (dispatch_budget_s ran out first)."""
        return self.total - self.succeeded - self.failed

    @property
    def exit_code(self) -> int:
        """0: every rollout has a reward; 1: some failed or were not started (the run ended)."""
        return 0 if self.failed == 0 and self.not_started == 0 else 1


def open_run(config: CollectConfig, summary: InputSummary, *, redactor: Redactor | None = None) -> RunFiles:
    """Lock the output, then start fresh or resume; raises before any rollout is run.

    An output that is the input (or a run file beside it) is refused before anything is opened
    for writing; an output the process cannot write is a ConfigError naming the path and why.
    """
    paths = OutputPaths.for_output(config.output_jsonl_fpath)
    refuse_writing_input(paths, summary.path, report=config.report)
    try:
        return _open_run(config, summary, paths, redactor or Redactor(()))
    except OSError as exc:
        raise unwritable_output(paths, exc) from None


def unwritable_output(paths: OutputPaths, exc: OSError) -> ConfigError:
    """The path that could not be created or opened, and the system's reason, as exit 2.

    The output guard catches these before the run; this is for what changes in between."""
    where = exc.filename or paths.output
    reason = exc.strerror or type(exc).__name__
    if isinstance(exc, IsADirectoryError):
        reason = "it is a directory; give a file path"
    elif isinstance(exc, FileExistsError | NotADirectoryError):
        reason = f"a part of its folder path ({where} or above) is a file, not a directory"
        where = paths.output
    return ConfigError(
        f"output_jsonl_fpath: cannot write {where}: {reason}",
        hint="choose a writable file path, e.g. +output_jsonl_fpath=results/rollouts.jsonl",
    )


def _open_run(
    config: CollectConfig, summary: InputSummary, paths: OutputPaths, redactor: Redactor
) -> RunFiles:
    paths.output.parent.mkdir(parents=True, exist_ok=True)
    fingerprint = Fingerprint.of(config, summary)
    writer = ResultWriter(paths.output)
    try:
        if config.starts_over:
            writer.truncate()
            paths.remove_run_files()
            resuming = False
        else:
            resuming = check_resumable(paths, fingerprint, input_path=summary.path)
        write_fingerprint(paths, fingerprint)
        scoreboard = Scoreboard(
            num_tasks=summary.num_tasks,
            num_repeats=config.num_repeats,
            agents=summary.agents,
            task_agents=summary.task_agents,
        )
        files = RunFiles(
            paths=paths,
            writer=writer,
            failures=FailureLog(paths.failures, redactor=redactor),
            scoreboard=scoreboard,
        )
    except BaseException:
        writer.close()
        raise
    if resuming:
        _read_back(files, summary)
    return files


def _read_back(files: RunFiles, summary: InputSummary) -> None:
    """Fill the scoreboard from the output an earlier run wrote (NeMo Gym's indices there)."""
    repair = repair_torn_tail(files.paths.output)
    if repair is not None:
        files.notes.append(repair.describe(files.paths.output))
    scoreboard = files.scoreboard
    k = scoreboard.num_repeats
    for line_no, outcome in read_results(files.paths.output):
        cell = summary.internal(outcome.task_index, outcome.rollout_index, k)
        if cell is None or not scoreboard.contains(*cell):
            raise DataError(
                f"{files.paths.output}:{line_no}: ({TASK_KEY}={outcome.task_index}, "
                f"{ROLLOUT_KEY}={outcome.rollout_index}) is outside this run's {scoreboard.num_tasks} tasks "
                f"x {scoreboard.num_repeats} repeats",
                hint="the output does not match its fingerprint; start over with +overwrite=true",
            )
        files.resumed += scoreboard.record(replace(outcome, task_index=cell[0], rollout_index=cell[1]))
    if scoreboard.duplicates:
        files.notes.append(
            f"{files.paths.output}: {scoreboard.duplicates} duplicate rows (kept the first of each)"
        )
    cells = (
        summary.internal(int(r[TASK_KEY]), int(r[ROLLOUT_KEY]), k)
        for r in read_failures(files.paths.failures)
    )
    files.retrying_failed = sum(1 for cell in cells if cell is not None and not scoreboard.is_done(*cell))


def close_run(config: CollectConfig, files: RunFiles, stats: RunStats) -> CollectResult:
    """Keep only this run's failures in the failures file, write the metrics, sum it all up."""
    files.failures.rewrite_from(files.failures.start_offset)
    if files.failures.path.stat().st_size == 0:
        files.failures.path.unlink()
    metrics = build_metrics(config, files, stats)
    write_bytes_atomically(files.paths.metrics, orjson.dumps(metrics, option=orjson.OPT_INDENT_2))
    _write_aggregate_metrics(config, files)
    scoreboard = files.scoreboard
    if stats.drained:
        files.notes.append(
            f"{stats.drained} rollouts not started: dispatch_budget_s={config.dispatch_budget_s:g} ran out; "
            "run the same command again to run them"
        )
    return CollectResult(
        paths=files.paths,
        metrics=metrics,
        notes=files.notes,
        succeeded=scoreboard.done,
        failed=scoreboard.failed,
        total=scoreboard.total,
    )


def _write_aggregate_metrics(config: CollectConfig, files: RunFiles) -> None:
    """NeMo Gym's `_aggregate_metrics.json`: the scored rollouts (read back), the zeros the
    count_* options ask for, each agent's environment hooks."""
    rows = list(read_rows(files.paths.output, skip_torn=True))
    zeros = counted_zeros(
        rows,
        read_failures(files.paths.failures),
        files.paths.materialized,
        failure_classes=config.count_failure_classes_as_zero,
        count_missing=config.count_missing_rollouts_as_zero,
    )
    hooks, note = _stack_hooks(config, files.scoreboard.agents)
    if note:
        files.notes.append(note)
    write_aggregate_metrics(files.paths.aggregate_metrics, rows, hooks=hooks, zeros=zeros)


def _stack_hooks(config: CollectConfig, agents: list[str]) -> tuple[dict[str, MetricHooks], str | None]:
    """The metric hooks of the agents' environments, from the stack's config (the head server's
    `/config`); none asked for when every agent came from +agent_urls. A stack that cannot be read
    costs the hooks, never the run: its metrics are NeMo Gym's defaults, and a note says so."""
    if all(agent in config.agent_urls for agent in agents):
        return {}, None
    from ng_cli.head import fetch_config

    try:
        return hooks_by_agent(fetch_config(config.head_server_url, timeout_s=10.0)), None
    except Exception as exc:  # the run is done; only its metrics' shape is at stake
        return {}, (
            f"_aggregate_metrics.json has NeMo Gym's default metrics only: the environments' metric hooks "
            f"could not be loaded ({type(exc).__name__}: {exc}); ng_aggregate_rollouts -c <stack config> "
            "writes them again"
        )


def build_metrics(config: CollectConfig, files: RunFiles, stats: RunStats) -> dict[str, Any]:
    """`<output stem>_metrics.json`: per agent, overall, and this run's throughput."""
    scoreboard = files.scoreboard
    elapsed_s = stats.elapsed_s
    return {
        "output": str(files.paths.output),
        "num_tasks": scoreboard.num_tasks,
        "num_repeats": scoreboard.num_repeats,
        "total_rollouts": scoreboard.total,
        "succeeded": scoreboard.done,
        "failed": scoreboard.failed,
        "mean_reward": scoreboard.mean_reward(),
        "pass_threshold": config.pass_threshold,
        "weight_versions": scoreboard.versions.as_dict(max_staleness=config.max_staleness),
        "agents": {
            agent: scoreboard.agent_metrics(agent, pass_threshold=config.pass_threshold)
            for agent in scoreboard.agents
        },
        "run": {
            "resumed_rollouts": files.resumed,
            "retried_earlier_failures": files.retrying_failed,
            "succeeded": stats.succeeded,
            "failed": stats.failed,
            "attempts": stats.attempts,
            "retried_rollouts": stats.retried,
            "recovered_rollouts": stats.recovered,
            "failed_attempts": dict(stats.attempt_failures),
            "elapsed_s": round(elapsed_s, 3),
            "rollouts_per_s": stats.succeeded / elapsed_s,
            "output_tokens_per_s": stats.output_tokens / elapsed_s,
            "num_samples_in_parallel": config.num_samples_in_parallel,
        },
    }
