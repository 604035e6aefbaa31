"""`ReportConfig`: the options of `ng_report`, read from the composed config tree like every command's."""

from __future__ import annotations

import difflib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.schema import validate_block
from ng_cli.config.sources import COMMAND_LINE
from ng_cli.errors import ConfigError

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
    fields = tuple(ReportConfig.model_fields)
    for key in composed.tree:
        close = [] if key in fields else difflib.get_close_matches(key, fields, n=1, cutoff=0.8)
        if close:  # `+output_html_path=x` must not be ignored silently
            where = composed.sources.lookup(key) or COMMAND_LINE
            raise ConfigError(f"{where}  {key}: unknown option", hint=f"did you mean +{close[0]}=...?")
    values = {key: composed.tree[key] for key in fields if composed.tree.get(key) is not None}
    if "input_jsonl_fpath" not in values:
        raise ConfigError(
            "input_jsonl_fpath: which rollouts file to report on?",
            hint="ng_report +input_jsonl_fpath=results/out.jsonl  (the output of ng_collect_rollouts)",
        )
    return validate_block(ReportConfig, values, sources=composed.sources)
