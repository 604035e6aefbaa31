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
from ng_cli.rollouts.nemo_profile import NemoProfileResult, nemo_profile_config_from, profile_like_nemo_gym
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
NeMo Gym's form (its file names and contents, computed as it computes them):
  materialized_inputs_jsonl_fpath  the collector's <stem>_materialized_inputs.jsonl
  rollouts_jsonl_fpath             the collector's output
  allow_partial_rollouts           true: drop materialized rows without a result (else exit 2)
  -> <rollouts stem>_reward_profiling.jsonl, _agent_metrics.json, _repeat_level_metrics.json
Exit codes: 0 written, 2 missing or mismatched files, bad options.
Examples:
  ng_reward_profile +input_jsonl_fpath=tasks.jsonl +rollouts_jsonl_fpath=rollouts.jsonl \\
      +output_jsonl_fpath=profile.jsonl "+keep_pass_rate=[0.1,0.9]"
  ng_reward_profile +materialized_inputs_jsonl_fpath=out_materialized_inputs.jsonl +rollouts_jsonl_fpath=out.jsonl"""

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
        nemo_gym_form = nemo_profile_config_from(composed)
        if nemo_gym_form is not None:
            make_console().print(_nemo_report(profile_like_nemo_gym(nemo_gym_form)), highlight=False)
            return
        result = profile_rewards(profile_config_from(composed))
    make_console().print(_report(result), highlight=False)


def _nemo_report(result: NemoProfileResult) -> str:
    """NeMo Gym's closing lines."""
    done, expected = result.completed_rollouts, result.expected_rollouts
    percent = 100.0 if expected == 0 else 100.0 * done / expected
    profiling, agents, repeats = result.files
    return (
        f"Profiling outputs:\nReward profile completion: {done}/{expected} rollout rows ({percent:.2f}%)\n"
        f"Input rows: {result.tasks} total; {result.complete_tasks} complete; {result.partial_tasks} partial; "
        f"{result.missing_tasks} without rollouts dropped from output.\n"
        f"Reward profiling outputs: {profiling}\nAgent-level metrics: {agents}\nRepeat-level metrics: {repeats}"
    )


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
