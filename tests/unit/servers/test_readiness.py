"""`poll_until`, the one readiness loop: answers, deadlines, early ends, pacing."""

from __future__ import annotations

import threading

import pytest

from ng_cli.servers.readiness import poll_until


def test_true_once_ready_answers_yes_and_not_asked_again() -> None:
    answers = iter([False, False, True])
    calls: list[int] = []

    def ready() -> bool:
        calls.append(1)
        return next(answers)

    assert poll_until(ready, timeout_s=30.0, first_retry_s=0.001)
    assert len(calls) == 3


def test_false_when_the_deadline_passes_and_the_waits_are_paced() -> None:
    calls: list[int] = []

    def never() -> bool:
        calls.append(1)
        return False

    assert not poll_until(never, timeout_s=0.3, first_retry_s=0.005, max_retry_s=0.1)
    # Paced (5, 10, 20, 40, 80, 100 ms ...): a handful of tries, never a spin of thousands.
    assert 2 <= len(calls) <= 20


def test_check_ends_the_wait_with_its_own_error_before_ready_is_asked() -> None:
    asked: list[int] = []

    def check() -> None:
        raise RuntimeError("exited with code 3")

    with pytest.raises(RuntimeError, match="code 3"):
        poll_until(lambda: bool(asked.append(1)), timeout_s=30.0, check=check)
    assert asked == []


def test_a_cancel_from_another_thread_ends_a_long_pause_at_once() -> None:
    cancelled, asked = threading.Event(), threading.Event()
    result: list[bool] = []

    def ready() -> bool:
        asked.set()
        return False

    def wait() -> None:
        result.append(poll_until(ready, timeout_s=7200.0, cancelled=cancelled, first_retry_s=3600.0))

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    assert asked.wait(60)
    cancelled.set()  # as a stop request would, while the waiter is in its hour-long pause
    waiter.join(60)
    assert not waiter.is_alive()
    assert result == [False]
