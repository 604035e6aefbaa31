"""`ng_reward_profile`: reward statistics per task, and the tasks worth training on by pass rate."""

from __future__ import annotations

from typing import Annotated

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    command_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.config.command_options import options_help
from ng_cli.rollouts.nemo_profile import NemoProfileResult, profile_like_nemo_gym
from ng_cli.rollouts.profile import ProfileResult, profile_rewards
from ng_cli.rollouts.profile_options import RewardProfileOptions

__all__ = ["OPTIONS", "app", "main", "reward_profile"]

OPTIONS = RewardProfileOptions
_HINT = (
    "ng_reward_profile +input_jsonl_fpath=TASKS +rollouts_jsonl_fpath=ROLLOUTS +output_jsonl_fpath=PROFILE, "
    "or NeMo Gym's form: +materialized_inputs_jsonl_fpath=<stem>_materialized_inputs.jsonl "
    "+rollouts_jsonl_fpath=<stem>.jsonl"
)

_EPILOG = options_help(
    RewardProfileOptions,
    docs="docs/reward_profile.md",
    notes="""Exit codes: 0 written, 2 missing or mismatched files, bad options.
Examples:
  ng_reward_profile +input_jsonl_fpath=tasks.jsonl +rollouts_jsonl_fpath=rollouts.jsonl \\
      +output_jsonl_fpath=profile.jsonl "+keep_pass_rate=[0.1,0.9]"
  ng_reward_profile +materialized_inputs_jsonl_fpath=out_materialized_inputs.jsonl +rollouts_jsonl_fpath=out.jsonl""",
)

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
    with command_config(
        overrides,
        RewardProfileOptions,
        command="ng_reward_profile",
        verbose=verbose,
        config_files=config,
        asks={"rollouts_jsonl_fpath": ("which rollouts? (the collector's output)", _HINT)},
    ) as (options, _):
        nemo_gym_form = options.nemo_gym_form()
        if nemo_gym_form is not None:
            make_console().print(_nemo_report(profile_like_nemo_gym(nemo_gym_form)), highlight=False)
            return
        result = profile_rewards(options.our_form())
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
