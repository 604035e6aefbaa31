"""`ng_reward_profile` in NeMo Gym's documented form writes NeMo Gym's files with NeMo Gym's numbers."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from ng_cli.commands.reward_profile import app
from ng_cli.errors import DataError
from ng_cli.rollouts.nemo_profile import NemoProfileConfig, nemo_profile_paths, profile_like_nemo_gym
from tests.fixtures.nemo_gym_metrics.compare import load, same
from tests.fixtures.rollouts.rollout_rows import write_jsonl

pytestmark = pytest.mark.usefixtures("empty_env_yaml")


def files_of(tmp_path: Path, case: str) -> tuple[Path, Path]:
    materialized = write_jsonl(
        tmp_path / "out_materialized_inputs.jsonl", load(f"{case}_materialized_inputs.json")
    )
    rollouts = write_jsonl(tmp_path / "out.jsonl", list(reversed(load(f"{case}_rollouts.json"))))  # any order
    return materialized, rollouts


@pytest.mark.parametrize("case", ["three_by_three", "single_repeat"])
def test_the_three_files_equal_nemo_gyms(tmp_path: Path, case: str) -> None:
    materialized, rollouts = files_of(tmp_path, case)
    profile_like_nemo_gym(
        NemoProfileConfig(
            materialized_inputs_jsonl_fpath=materialized,
            rollouts_jsonl_fpath=rollouts,
            allow_partial_rollouts=True,
        )
    )
    profiling, agents, repeats = nemo_profile_paths(rollouts)
    assert profiling.name == "out_reward_profiling.jsonl"
    assert (agents.name, repeats.name) == ("out_agent_metrics.json", "out_repeat_level_metrics.json")
    expected = load(f"{case}_profile.json")
    same([orjson.loads(line) for line in profiling.read_bytes().splitlines()], expected["reward_profiling"])
    same(orjson.loads(agents.read_bytes()), expected["agent_metrics"])
    same(orjson.loads(repeats.read_bytes()), expected["repeat_level_metrics"])


def test_a_partial_collection_is_refused_unless_allowed(tmp_path: Path) -> None:
    materialized, rollouts = files_of(tmp_path, "three_by_three")
    with pytest.raises(DataError, match=r"Missing rollout results for 1 materialized input rows"):
        profile_like_nemo_gym(
            NemoProfileConfig(materialized_inputs_jsonl_fpath=materialized, rollouts_jsonl_fpath=rollouts)
        )
    assert not nemo_profile_paths(rollouts)[0].exists()


def test_nemo_gyms_documented_command_line_runs(tmp_path: Path) -> None:
    """`ng_reward_profile +materialized_inputs_jsonl_fpath=... +rollouts_jsonl_fpath=...`: no
    +output_jsonl_fpath, as NeMo Gym documents it."""
    materialized, rollouts = files_of(tmp_path, "single_repeat")
    result = CliRunner().invoke(
        app, [f"+materialized_inputs_jsonl_fpath={materialized}", f"+rollouts_jsonl_fpath={rollouts}"]
    )
    assert result.exit_code == 0, result.output
    assert "Reward profile completion: 2/2 rollout rows (100.00%)" in result.output
    assert nemo_profile_paths(rollouts)[0].is_file()


def test_the_two_forms_do_not_mix(tmp_path: Path) -> None:
    materialized, rollouts = files_of(tmp_path, "single_repeat")
    result = CliRunner().invoke(
        app,
        [
            f"+materialized_inputs_jsonl_fpath={materialized}",
            f"+rollouts_jsonl_fpath={rollouts}",
            f"+output_jsonl_fpath={tmp_path / 'p.jsonl'}",
        ],
    )
    assert result.exit_code == 2
    assert "cannot be combined with output_jsonl_fpath" in result.output
