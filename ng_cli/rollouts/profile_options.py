"""`RewardProfileOptions`: `ng_reward_profile`'s keys, for both of its forms.

    ours:       +input_jsonl_fpath +rollouts_jsonl_fpath +output_jsonl_fpath [+pass_threshold
                +keep_pass_rate +count_failures_as_zero]                       -> ProfileConfig
    NeMo Gym's: +materialized_inputs_jsonl_fpath +rollouts_jsonl_fpath [+allow_partial_rollouts]
                                                                               -> NemoProfileConfig

One model, read through `command_options` like every command's; which form is meant follows from
`materialized_inputs_jsonl_fpath`, and mixing the two is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import field_validator, model_validator

from ng_cli.config.command_options import CommandOptions
from ng_cli.rollouts.nemo_profile import NemoProfileConfig
from ng_cli.rollouts.profile import ProfileConfig, check_pass_rate_range

__all__ = ["RewardProfileOptions"]

_OURS = (
    "input_jsonl_fpath",
    "output_jsonl_fpath",
    "keep_pass_rate",
    "count_failures_as_zero",
    "pass_threshold",
)
_NEMO_GYM = ("materialized_inputs_jsonl_fpath", "allow_partial_rollouts")


class RewardProfileOptions(CommandOptions):
    """Our form (a profile line per task, a curriculum filter) or NeMo Gym's (its three files)."""

    rollouts_jsonl_fpath: Path
    """The collector's output (its `<stem>_failures.jsonl` beside it is read too, in our form)."""
    input_jsonl_fpath: Path | None = None
    """Our form: the tasks, the input the rollouts were collected from."""
    output_jsonl_fpath: Path | None = None
    """Our form: the profile, one line per task (rollouts, failed, mean/std/min/max reward, pass_rate)."""
    pass_threshold: float | None = None
    """Our form: a rollout passes when reward >= this; without it, when reward > 0 (as in the collector)."""
    keep_pass_rate: tuple[float, float] | None = None
    """Our form: [lo, hi]: also write `<profile stem>.kept.jsonl`, the tasks with lo <= pass rate <= hi."""
    count_failures_as_zero: bool = False
    """Our form: a failed rollout counts as reward 0 (default: left out)."""
    materialized_inputs_jsonl_fpath: Path | None = None
    """NeMo Gym's form: the collector's `<stem>_materialized_inputs.jsonl`; writes
    `<rollouts stem>_reward_profiling.jsonl`, `_agent_metrics.json`, `_repeat_level_metrics.json`."""
    allow_partial_rollouts: bool = False
    """NeMo Gym's form: drop materialized rows without a result (else exit 2)."""

    _range = field_validator("keep_pass_rate")(check_pass_rate_range)

    @model_validator(mode="after")
    def _one_form(self) -> Self:
        given = self.model_fields_set
        if self.materialized_inputs_jsonl_fpath is not None:
            mixed = [key for key in _OURS if key in given and getattr(self, key) not in (None, False)]
            if mixed:
                raise ValueError(
                    f"materialized_inputs_jsonl_fpath (NeMo Gym's form) cannot be combined with "
                    f"{', '.join(mixed)} (ours)"
                )
            return self
        missing = [key for key in ("input_jsonl_fpath", "output_jsonl_fpath") if getattr(self, key) is None]
        if missing:
            raise ValueError(
                f"missing {' and '.join(missing)} (or give materialized_inputs_jsonl_fpath for NeMo Gym's form)"
            )
        if "allow_partial_rollouts" in given and self.allow_partial_rollouts:
            raise ValueError(
                "allow_partial_rollouts belongs to NeMo Gym's form (materialized_inputs_jsonl_fpath)"
            )
        return self

    def nemo_gym_form(self) -> NemoProfileConfig | None:
        """NeMo Gym's form, when `materialized_inputs_jsonl_fpath` is given."""
        if self.materialized_inputs_jsonl_fpath is None:
            return None
        return NemoProfileConfig(
            materialized_inputs_jsonl_fpath=self.materialized_inputs_jsonl_fpath,
            rollouts_jsonl_fpath=self.rollouts_jsonl_fpath,
            allow_partial_rollouts=self.allow_partial_rollouts,
        )

    def our_form(self) -> ProfileConfig:
        """Our form (checked complete by the model)."""
        assert self.input_jsonl_fpath is not None
        assert self.output_jsonl_fpath is not None
        return ProfileConfig(
            input_jsonl_fpath=self.input_jsonl_fpath,
            rollouts_jsonl_fpath=self.rollouts_jsonl_fpath,
            output_jsonl_fpath=self.output_jsonl_fpath,
            pass_threshold=self.pass_threshold,
            keep_pass_rate=self.keep_pass_rate,
            count_failures_as_zero=self.count_failures_as_zero,
        )
