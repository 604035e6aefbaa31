"""`nemo_gym.rollout_collection`: the record keys and the resume rule servers import."""

from __future__ import annotations

from ng_cli.nemo_gym_compat.api import rollout_collection as rc


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
