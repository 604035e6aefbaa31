"""`write_report`: stream a rollouts file once into a self-contained HTML report, written atomically.

    rows (streamed) --> Tally (columns)        --> figures, task table   --> page_start, #ng-data
                    \\-> compact conversation --> deflate + base64 chunks --> #ng-chunks (temp file)

Memory is the tally (tens of bytes per rollout) and one chunk of conversations; the chunks wait
in a temporary file until the page around them is known. The report is written beside its final
name and renamed into place, so a failed run never leaves half a report.
"""

from __future__ import annotations

import base64
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from ng_cli.outputs import check_outputs, reads, write_atomically, writes
from ng_cli.report.conversation import compact
from ng_cli.report.figures import RunInfo, compute_figures, task_columns
from ng_cli.report.page import page_end, page_start, script_json
from ng_cli.report.rows import Problems, read_rows
from ng_cli.report.tally import Tally
from ng_cli.rollouts.failures import read_failures
from ng_cli.rollouts.resume import OutputPaths

__all__ = ["CHUNK_ROLLOUTS", "ReportResult", "report_path_for", "write_report"]

CHUNK_ROLLOUTS = 200
"""Conversations per compressed chunk: the unit the browser inflates when one is opened."""


@dataclass(frozen=True)
class ReportResult:
    """What was written, and what could not be read."""

    path: Path
    rollouts: int
    failed: int
    size_bytes: int
    problems: Problems
    notes: list[str]

    def describe(self) -> str:
        """The lines a command prints: where the report is, and what it could not read."""
        size_mb = self.size_bytes / 1e6
        lines = [f"report: {self.path}  ({self.rollouts} rollouts, {self.failed} failed; {size_mb:.1f} MB)"]
        lines += [f"note: {note}" for note in self.notes]
        if self.problems.count:
            lines.append("warning: " + self.problems.summary())
        return "\n".join(lines)

    @property
    def exit_code(self) -> int:
        """0: every line was read; 1: the report was written but some lines were skipped."""
        return 1 if self.problems.count else 0


def report_path_for(rollouts: Path) -> Path:
    """`runs/out.jsonl` -> `runs/out_report.html`, beside the run's other files."""
    return OutputPaths.for_output(rollouts).report


def write_report(
    rollouts: Path, output: Path | None = None, *, pass_threshold: float | None = None
) -> ReportResult:
    """Read `rollouts` (and its `_failures.jsonl` / `_metrics.json` when present), write the report.

    An `output` that is one of those files, or that cannot be written, is a ConfigError first."""
    output = output or report_path_for(rollouts)
    paths = OutputPaths.for_output(rollouts)
    check_outputs(writes("output_html_fpath", output), reads("input_jsonl_fpath", rollouts, *paths.all[1:]))
    problems = Problems(rollouts)
    notes: list[str] = []
    info = _run_info(paths.metrics, notes)
    threshold = pass_threshold if pass_threshold is not None else info.pass_threshold
    tally = Tally()
    with tempfile.TemporaryFile() as chunks:
        _stream(rollouts, tally, chunks, problems)
        _read_failures(paths.failures, tally, notes)
        figures = compute_figures(
            tally, RunInfo(info.num_repeats, threshold, info.rollouts_per_s, info.elapsed_s)
        )
        data = _data(tally, figures.k, threshold)
        all_notes = ([problems.summary()] if problems.count else []) + notes
        start = page_start(source=str(rollouts), figures=figures, notes=all_notes, threshold=threshold)
        size = _write_page(output, start, data, chunks)
    return ReportResult(
        path=output,
        rollouts=tally.rollouts,
        failed=len(tally.failures),
        size_bytes=size,
        problems=problems,
        notes=notes,
    )


def _stream(rollouts: Path, tally: Tally, chunks: IO[bytes], problems: Problems) -> None:
    """One pass over the rows: count each, and append its conversation to the current chunk."""
    seen: set[tuple[int, int]] = set()
    batch: list[dict[str, Any]] = []
    for row in read_rows(rollouts, problems):
        key = (row.outcome.task_index, row.outcome.rollout_index)
        if key in seen:
            problems.add(row.line, f"duplicate of task {key[0]} repeat {key[1]} (kept the first)")
            continue
        seen.add(key)
        tally.add(row)
        batch.append(compact(row.data, line=row.line))
        if len(batch) == CHUNK_ROLLOUTS:
            _write_chunk(chunks, batch)
            batch = []
    if batch:
        _write_chunk(chunks, batch)


def _write_chunk(chunks: IO[bytes], batch: list[dict[str, Any]]) -> None:
    packed = base64.b64encode(zlib.compress(orjson.dumps(batch), 6))
    chunks.write((b"," if chunks.tell() else b"") + b'"' + packed + b'"')


def _read_failures(path: Path, tally: Tally, notes: list[str]) -> None:
    try:
        tally.add_failures(read_failures(path))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        notes.append(
            f"{path}: could not read every failure record ({type(exc).__name__}: {exc}); "
            f"{len(tally.failures)} read"
        )


def _run_info(path: Path, notes: list[str]) -> RunInfo:
    """k, the pass threshold and the throughput from the collector's metrics file, if any."""
    if not path.exists():
        return RunInfo()
    try:
        metrics = orjson.loads(path.read_bytes())
        run = metrics.get("run") or {}
        return RunInfo(
            num_repeats=int(metrics["num_repeats"]),
            pass_threshold=metrics.get("pass_threshold"),
            rollouts_per_s=run.get("rollouts_per_s"),
            elapsed_s=run.get("elapsed_s"),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        notes.append(
            f"{path}: not a metrics file written by ng_collect_rollouts ({type(exc).__name__}); ignored"
        )
        return RunInfo()


def _data(tally: Tally, k: int, threshold: float | None) -> dict[str, Any]:
    """The columns the page's script reads (#ng-data)."""
    return {
        "k": k,
        "threshold": threshold,
        "chunk": CHUNK_ROLLOUTS,
        "agents": tally.agents,
        "tasks": task_columns(tally, k, threshold),
        "rollouts": {
            "task": tally.task.tolist(),
            "repeat": tally.repeat.tolist(),
            "reward": tally.reward.tolist(),
        },
        "failures": {
            "task": [f.task_index for f in tally.failures],
            "repeat": [f.rollout_index for f in tally.failures],
            "kind": [f.kind for f in tally.failures],
        },
    }


def _write_page(output: Path, start: str, data: dict[str, Any], chunks: IO[bytes]) -> int:
    """Write the page beside `output`, then rename it into place; returns its size in bytes."""
    with write_atomically(output) as (file,):
        file.write(start.encode())
        file.write(b'<script id="ng-data" type="application/json">')
        file.write(script_json(data))
        file.write(b'</script><script id="ng-chunks" type="application/json">[')
        chunks.seek(0)
        shutil.copyfileobj(chunks, file)
        file.write(b"]</script>")
        file.write(page_end().encode())
    return output.stat().st_size
