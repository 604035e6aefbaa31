"""`ng_reward_profile`: reward statistics per task, and the tasks worth training on by pass rate."""

from __future__ import annotations

from typing import Annotated

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    composed_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.rollouts.profile import ProfileResult, profile_config_from, profile_rewards

__all__ = ["app", "main", "reward_profile"]

_EPILOG = """\b
Config keys this command reads (see docs/reward_profile.md):
  input_jsonl_fpath        the tasks: the input the rollouts were collected from
  rollouts_jsonl_fpath     the collector's output (<stem>_failures.jsonl beside it is read too)
  output_jsonl_fpath       the profile: per task rollouts, failed, mean/std/min/max reward, pass_rate
  pass_threshold           reward >= this passes (default: reward > 0), as in the collector
  keep_pass_rate           [lo,hi]: also write <profile stem>.kept.jsonl, the tasks with lo <= pass rate <= hi
  count_failures_as_zero   true: a failed rollout counts as reward 0 (default: left out)
Exit codes: 0 written, 2 missing or mismatched files, bad options.
Example:
  ng_reward_profile +input_jsonl_fpath=tasks.jsonl +rollouts_jsonl_fpath=rollouts.jsonl \\
      +output_jsonl_fpath=profile.jsonl "+keep_pass_rate=[0.1,0.9]" """

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def reward_profile(
    overrides: Annotated[
        list[str] | None,
        overrides_argument("+input_jsonl_fpath=... +rollouts_jsonl_fpath=... +output_jsonl_fpath=..."),
    ] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Write one profile line per task; with +keep_pass_rate, the kept tasks and what was dropped."""
    with composed_config(overrides, config, verbose=verbose) as composed:
        result = profile_rewards(profile_config_from(composed))
    make_console().print(_report(result), highlight=False)


def _report(result: ProfileResult) -> str:
    lines = [
        f"{result.tasks} tasks, {result.profiled} with rollouts: {result.all_pass} all pass, "
        f"{result.all_fail} all fail -> {result.profile}"
    ]
    if result.kept_path is not None:
        lines.append(
            f"kept {result.kept} -> {result.kept_path}; dropped {result.dropped_low} below the range "
            f"(too hard), {result.dropped_high} above it (too easy), {result.no_rollouts} without rollouts"
        )
    return "\n".join(lines)


def main() -> None:
    """Console-script entry point (`ng_reward_profile`)."""
    app()
