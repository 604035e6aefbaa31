"""How a run ended, from its exit status, signal and the limits we enforced."""

from __future__ import annotations

from ng_cli.sandbox.result import classify


def test_an_oom_kill_of_the_program_is_a_memory_limit_and_of_a_child_is_not() -> None:
    common = {"cpu_s": 0.1, "cpu_limit_s": 5, "timed_out": False, "output_truncated": False}
    assert classify(exit_code=None, signal_number=9, oom_killed=True, **common) == "memory_limit"
    assert classify(exit_code=None, signal_number=9, oom_killed=False, **common) == "killed"
    assert classify(exit_code=0, signal_number=None, oom_killed=True, **common) == "ok"
