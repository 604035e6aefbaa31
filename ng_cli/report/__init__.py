"""A run's rollouts as one self-contained HTML file: metrics, plots, a task table and a chat browser.

`ng_report` and `ng_collect_rollouts +report=true` call `write_report`. See docs/report.md.
"""

from __future__ import annotations

from ng_cli.report.build import ReportResult, report_path_for, write_report

__all__ = ["ReportResult", "report_path_for", "write_report"]
