"""Agents' datasets: find them in the config, validate every row, collate a split, measure it.

`ng_prepare_data` is `datasets_for` + `prepare_splits`; `ng_e2e_collect_rollouts`
collates one split with the same code before it starts the stack.
"""

from __future__ import annotations

from ng_cli.datasets.catalog import SPLITS, AgentDataset, dataset_inputs, datasets_for
from ng_cli.datasets.prepare import (
    MODES,
    SplitReport,
    prepare_data,
    prepare_splits,
    split_files,
    splits_of_mode,
)

__all__ = [
    "MODES",
    "SPLITS",
    "AgentDataset",
    "SplitReport",
    "dataset_inputs",
    "datasets_for",
    "prepare_data",
    "prepare_splits",
    "split_files",
    "splits_of_mode",
]
