"""Validate and collate splits of the config's datasets: `<dir>/<split>.jsonl` + metrics.

    for each split, each dataset: stream its rows -> check each -> append to a staging file
    any bad row anywhere: each is reported as `file:line: reason`, staging removed, exit 2
    no bad row: each staging file becomes `<split>.jsonl`, beside `<split>_metrics.json`

Before any of it, `prepare_data` refuses (exit 2) an `+output_dirpath` where a split file would
land on a dataset the config declares (`ng_cli.outputs`): the collated file is written from its
sources, so writing it over one of them would lose that dataset's rows.

One pass over each file, one row in memory at a time: a 1 GB dataset needs no more memory than
a small one. Every row gets `agent_ref` naming its dataset's agent, so the collated file can be
given to `ng_collect_rollouts` as is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.paths import display_path
from ng_cli.datasets.catalog import AgentDataset, dataset_inputs, datasets_for
from ng_cli.datasets.metrics import DatasetMetrics
from ng_cli.datasets.rows import check_row, with_agent_ref
from ng_cli.errors import ConfigError, DataError
from ng_cli.outputs import StagedFile, check_outputs, write_atomically, write_bytes_atomically, writes

__all__ = [
    "MODES",
    "ProblemSink",
    "SplitReport",
    "metrics_path",
    "prepare_data",
    "prepare_splits",
    "split_files",
    "splits_of_mode",
]

MODES: dict[str, tuple[str, ...]] = {
    "train_preparation": ("train", "validation"),
    "example_validation": ("example",),
}
ProblemSink = Callable[[str], None]
"""Called with `file:line: reason` for each bad row as it is found."""


@dataclass(frozen=True)
class SplitReport:
    """What one split produced."""

    split: str
    output: Path
    metrics_file: Path
    metrics: dict[str, Any]
    """What `metrics_file` holds: per dataset, and the split's total."""


def splits_of_mode(mode: object) -> tuple[str, ...]:
    """The dataset types a `+mode=` covers; ConfigError naming the choices otherwise."""
    if isinstance(mode, str) and mode in MODES:
        return MODES[mode]
    raise ConfigError(
        f"mode: expected one of {', '.join(MODES)}, got {mode!r}",
        hint="+mode=example_validation checks the example data; +mode=train_preparation the train and validation data",
    )


def prepare_data(
    config: ComposedConfig, *, mode: str, output_dir: Path, on_problem: ProblemSink
) -> list[SplitReport]:
    """`ng_prepare_data`'s body: `mode` picks the splits, `output_dir` is where they go."""
    splits = splits_of_mode(mode)
    found = datasets_for(config, splits)
    if not found:
        raise ConfigError(
            f"no agent in the config declares a dataset of type {' or '.join(splits)}",
            hint="add a datasets: entry to an agent (name, type, jsonl_fpath), or pass the config that has one",
        )
    by_split = {split: [d for d in found if d.dataset.type == split] for split in splits}
    plan = {split: datasets for split, datasets in by_split.items() if datasets}
    folder = output_dir.expanduser()
    check_outputs(writes("output_dirpath", folder, *split_files(folder, plan)), dataset_inputs(config))
    return prepare_splits(plan, folder, on_problem=on_problem)


def metrics_path(output: Path) -> Path:
    """`DIR/train.jsonl` -> `DIR/train_metrics.json`."""
    return output.with_name(output.stem + "_metrics.json")


def split_files(output_dir: Path, splits: Iterable[str]) -> list[Path]:
    """Every file `prepare_splits` writes: `<split>.jsonl` and `<split>_metrics.json` per split."""
    files: list[Path] = []
    for split in splits:
        output = output_dir / f"{split}.jsonl"
        files += [output, metrics_path(output)]
    return files


def prepare_splits(
    plan: dict[str, list[AgentDataset]], output_dir: Path, *, on_problem: ProblemSink
) -> list[SplitReport]:
    """Collate each split into `output_dir/<split>.jsonl` (and its metrics file), or, when any row
    of any split is bad, raise DataError and write none of them.

    The caller first checks `split_files(output_dir, plan)` against the datasets it reads
    (`ng_cli.outputs.check_outputs`), so that no split is written over a dataset."""
    outputs = [output_dir / f"{split}.jsonl" for split in plan]
    measured: list[list[tuple[AgentDataset, DatasetMetrics]]] = []
    bad = 0
    with write_atomically(*outputs) as staged:
        for datasets, out in zip(plan.values(), staged, strict=True):
            measured.append([])
            for dataset in datasets:
                metrics, problems = _collate_one(dataset, out, on_problem, writing=bad == 0)
                measured[-1].append((dataset, metrics))
                bad += problems
        if bad:
            names = ", ".join(display_path(output) for output in outputs)
            raise DataError(
                f"{bad} problem{'s' if bad != 1 else ''} (listed above); nothing was written ({names})",
                hint="fix every listed row, then run the same command again",
            )
        reports = []
        for split, output, split_measured in zip(plan, outputs, measured, strict=True):
            report = _metrics(split, split_measured)
            write_bytes_atomically(
                metrics_path(output),
                orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE),
            )
            reports.append(SplitReport(split, output, metrics_path(output), report))
    return reports


def _collate_one(
    dataset: AgentDataset, out: StagedFile, on_problem: ProblemSink, *, writing: bool
) -> tuple[DatasetMetrics, int]:
    """Append one dataset's valid rows to `out`; returns its metrics and how many rows were bad.

    Once a bad row is seen nothing more is written: the staging file will be thrown away.
    """
    metrics = DatasetMetrics()
    name = display_path(dataset.path)
    if not dataset.path.is_file():
        on_problem(
            f"{name}: no such file (dataset {dataset.label}, jsonl_fpath: {dataset.dataset.jsonl_fpath})"
        )
        return metrics, 1
    bad = 0
    with dataset.path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            checked = check_row(raw, agent=dataset.agent, row_model=dataset.row_model)
            if isinstance(checked, str):
                on_problem(f"{name}:{number}: {checked}")
                bad += 1
                continue
            metrics.add(checked)
            if writing and not bad:
                out.write(
                    orjson.dumps(with_agent_ref(checked, dataset.agent), option=orjson.OPT_APPEND_NEWLINE)
                )
    if metrics.examples == 0 and bad == 0:
        on_problem(f"{name}: the file has no rows (dataset {dataset.label})")
        bad = 1
    return metrics, bad


def _metrics(split: str, measured: list[tuple[AgentDataset, DatasetMetrics]]) -> dict[str, Any]:
    return {
        "split": split,
        "datasets": [
            {
                "agent": dataset.agent,
                "name": dataset.dataset.name,
                "jsonl_fpath": dataset.dataset.jsonl_fpath,
                "license": dataset.dataset.license,
                **metrics.summary(),
            }
            for dataset, metrics in measured
        ],
        "total": DatasetMetrics.merged(metrics for _, metrics in measured).summary(),
    }
