"""`ReportConfig`: the options of `ng_report`, read from the composed config tree like every command's."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ng_cli.config.command_options import command_options
from ng_cli.config.compose import ComposedConfig

__all__ = ["ReportConfig", "report_config_from"]


class ReportConfig(BaseModel):
    """Which rollouts to report on, and where the HTML goes."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    input_jsonl_fpath: Path
    """The output of ng_collect_rollouts; its `_failures.jsonl` and `_metrics.json` are read too."""
    output_html_fpath: Path | None = None
    """Where the report goes (default: `<input stem>_report.html` beside the input)."""
    pass_threshold: float | None = None
    """A rollout passes when reward >= this (default: the run's, from `_metrics.json`, else reward > 0)."""


def report_config_from(composed: ComposedConfig) -> ReportConfig:
    """Pick this command's keys out of the tree; a bad, missing or misspelt one is a ConfigError."""
    return command_options(
        composed,
        ReportConfig,
        command="ng_report",
        asks={
            "input_jsonl_fpath": (
                "which rollouts file to report on?",
                "ng_report +input_jsonl_fpath=results/out.jsonl  (the output of ng_collect_rollouts)",
            )
        },
    )
