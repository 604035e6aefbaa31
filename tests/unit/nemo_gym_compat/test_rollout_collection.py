"""`nemo_gym.rollout_collection`: the record keys and the resume rule servers import, and the
collector pieces gdpval builds on (with `path_utils`, `deliverables`, the observability flag)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from pydantic import ValidationError

from ng_cli.nemo_gym_compat.api import rollout_collection as rc
from ng_cli.nemo_gym_compat.api.base_responses_api_model import observability_enabled_from_config
from ng_cli.nemo_gym_compat.api.deliverables import is_deliverable
from ng_cli.nemo_gym_compat.api.path_utils import (
    aggregate_metrics_path_for,
    failures_path_for,
    materialized_path_for,
)


def test_record_keys_are_nemo_gyms() -> None:
    assert (rc.NG_FAILURE_CLASS_KEY, rc.NG_TERMINAL_KEY, rc.NG_NO_PERSIST_KEY) == (
        "_ng_failure_class",
        "_ng_failure_terminal",
        "_ng_no_persist",
    )
    assert (rc.TASK_INDEX_KEY_NAME, rc.ROLLOUT_INDEX_KEY_NAME) == ("_ng_task_index", "_ng_rollout_index")


def test_a_failure_is_terminal_when_stamped_and_timeouts_retry_only_when_asked() -> None:
    stamped_timeout = {rc.NG_FAILURE_CLASS_KEY: "timeout_exceeded", rc.NG_TERMINAL_KEY: True}
    assert rc.is_terminal_failure(stamped_timeout)
    assert not rc.is_terminal_failure(stamped_timeout, retry_terminal_timeouts=True)
    assert not rc.is_terminal_failure({rc.NG_FAILURE_CLASS_KEY: "agent_run_error"})
    skipped = {rc.NG_FAILURE_CLASS_KEY: "skipped"}
    assert not rc.is_terminal_failure(skipped)
    assert rc.is_terminal_failure(skipped, retry_terminal_timeouts=True)
    assert rc.is_terminal_failure(
        {rc.NG_FAILURE_CLASS_KEY: "other", rc.NG_TERMINAL_KEY: 1}, retry_terminal_timeouts=True
    )


# The collector pieces gdpval's multistage orchestrator builds on (NeMo Gym 0.7.0's behaviour).


def test_sidecar_paths_and_deliverables_are_nemo_gyms(tmp_path: Path) -> None:
    out = Path("results/run.jsonl")
    assert failures_path_for(out) == Path("results/run_failures.jsonl")
    assert materialized_path_for(out) == Path("results/run_materialized_inputs.jsonl")
    assert aggregate_metrics_path_for(out) == Path("results/run_aggregate_metrics.json")
    (tmp_path / "report.docx").write_text("x")
    (tmp_path / "history.json").write_text("{}")
    (tmp_path / "reference_files").mkdir()
    assert [p.name for p in sorted(tmp_path.iterdir()) if is_deliverable(p)] == ["report.docx"]


def test_max_rollout_attempts_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", raising=False)
    assert rc.get_max_rollout_attempts() == 3
    monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "5")
    assert rc.get_max_rollout_attempts() == 5
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", bad)
        assert rc.get_max_rollout_attempts() == 3


def test_latency_tracker_quantiles_and_adaptive_drain_margin() -> None:
    tracker = rc.DispatchLatencyTracker()
    assert tracker.quantile(0.5) is None
    assert tracker.drain_margin(None) is None
    for seconds in (40.0, 10.0, 0.0, 30.0, 20.0):  # a zero is not a duration
        tracker.record(seconds)
    assert tracker.drain_margin(None) is None  # four durations: too few to adapt
    tracker.record(50.0)
    assert tracker.quantile(0.5) == 30.0
    assert tracker.drain_margin(None) == 40.0  # p75 of 10..50
    assert tracker.drain_margin(7.0) == 7.0
    tracker.record_drained()
    assert tracker.drained == 1
    assert "Drained" in tracker.summary()


def test_observed_elapsed_reads_the_row_then_its_response() -> None:
    assert rc.observed_elapsed({"elapsed_seconds": "12.5"}) == 12.5
    assert (
        rc.observed_elapsed({"elapsed_seconds": 0, "response": {"metadata": {"elapsed_seconds": 3}}}) == 3.0
    )
    assert rc.observed_elapsed({"elapsed_seconds": "soon", "response": {}}) is None


def test_invalid_judge_rows_move_to_the_sidecar_once(tmp_path: Path) -> None:
    output = tmp_path / "rollouts.jsonl"
    deliverables = tmp_path / "d1"
    deliverables.mkdir()
    (deliverables / "answer.xlsx").write_text("x")
    rows = [
        {"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 0.7},
        {"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 0.0, "invalid_judge_response": True,
         "_ng_failure_terminal": True, "deliverables_dir": str(deliverables)},
        {"_ng_task_index": 2, "_ng_rollout_index": 0, "reward": 0.0, "invalid_judge_response": True,
         "deliverables_dir": str(tmp_path / "gone"), "reuse_cached_deliverable": True},
    ]  # fmt: skip
    output.write_text("".join(json.dumps(row) + "\n" for row in rows))
    output.chmod(0o640)
    assert rc.migrate_invalid_judge_main_rows(output) == 2
    assert [json.loads(line) for line in output.read_text().splitlines()] == rows[:1]
    assert output.stat().st_mode & 0o777 == 0o640
    moved = [json.loads(line) for line in (tmp_path / "rollouts_failures.jsonl").read_text().splitlines()]
    assert [(m["_ng_task_index"], m["_ng_failure_class"]) for m in moved] == [
        (1, "judge_invalid"),
        (2, "judge_invalid"),
    ]
    assert "_ng_failure_terminal" not in moved[0]
    assert moved[0]["reuse_cached_deliverable"] is True
    assert "reuse_cached_deliverable" not in moved[1]
    # a crash after the sidecar write, before the output's: the same rows come back, are not moved twice
    output.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert rc.migrate_invalid_judge_main_rows(output) == 2
    assert len((tmp_path / "rollouts_failures.jsonl").read_text().splitlines()) == 2
    assert rc.migrate_invalid_judge_main_rows(tmp_path / "absent.jsonl") == 0


def test_collection_config_checks_and_completion() -> None:
    config = rc.RolloutCollectionConfig(
        input_jsonl_fpath="in.jsonl", output_jsonl_fpath="out.jsonl", agent_name="a"
    )
    assert config.agent_map == {"_default": "a"}
    assert config.materialized_jsonl_fpath == Path("out_materialized_inputs.jsonl")
    for bad in (
        {"num_repeats": 0},
        {"dispatch_budget_s": 10},
        {"fan_out": {"x": []}},
        {"agent_map": {"_default": "b"}},
    ):
        with pytest.raises(ValidationError):
            rc.RolloutCollectionConfig(
                input_jsonl_fpath="in", output_jsonl_fpath="out", agent_name="a", **bad
            )
    shared = rc.SharedRolloutCollectionConfig(output_jsonl_fpath="out.jsonl", require_complete=True)
    done = [
        {"_ng_task_index": 0, "_ng_rollout_index": 0},
        {"_ng_task_index": 0, "_ng_rollout_index": 0},  # the same rollout twice counts once
        {"_ng_task_index": 1, "_ng_rollout_index": 0, "_ng_failure_class": "judge_invalid"},
    ]
    shared.check_completion(expected=1, results=done)
    with pytest.raises(RuntimeError, match="1/2 samples completed"):
        shared.check_completion(expected=2, results=done)


async def test_the_driver_is_refused_inside_a_server() -> None:
    config = rc.RolloutCollectionConfig(input_jsonl_fpath="in.jsonl", output_jsonl_fpath="out.jsonl")
    with pytest.raises(NotImplementedError, match="ng_collect_rollouts"):
        await rc.RolloutCollectionHelper().run_from_config(config)


def test_observability_flag_is_read_as_nemo_gym_reads_it() -> None:
    assert observability_enabled_from_config(OmegaConf.create({"policy": {}})) is False
    assert observability_enabled_from_config(
        {"observability_enabled": True, "model_call_capture_dir": "/tmp/c"}
    )
    with pytest.raises(ValidationError, match="model_call_capture_dir is required"):
        observability_enabled_from_config({"observability_enabled": True})
