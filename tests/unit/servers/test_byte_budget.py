"""ByteBudget (pure asyncio): who gets in, in what order, and that a waiter that gives up holds nothing."""

from __future__ import annotations

import asyncio

import pytest

from ng_cli.servers.byte_budget import ByteBudget


async def test_what_fits_goes_in_at_once_and_what_does_not_waits_for_a_release() -> None:
    budget = ByteBudget(100)
    assert await budget.acquire(60, timeout_s=0)
    waiter = asyncio.create_task(budget.acquire(50, timeout_s=10))
    await asyncio.sleep(0)
    assert not waiter.done()
    assert budget.waiting == 1

    budget.release(60)

    assert await waiter
    assert budget.used == 50
    assert budget.waiting == 0


async def test_first_come_first_served_a_small_body_does_not_pass_a_waiting_large_one() -> None:
    budget = ByteBudget(100)
    assert await budget.acquire(90, timeout_s=0)
    large = asyncio.create_task(budget.acquire(80, timeout_s=10))
    await asyncio.sleep(0)
    small = asyncio.create_task(budget.acquire(5, timeout_s=10))
    await asyncio.sleep(0)
    assert not small.done()  # 5 bytes would fit, but the 80 came first

    budget.release(90)

    assert await large
    assert await small
    assert budget.used == 85


async def test_a_waiter_that_times_out_holds_nothing_and_lets_the_next_in() -> None:
    budget = ByteBudget(100)
    assert await budget.acquire(60, timeout_s=0)
    late = asyncio.create_task(budget.acquire(50, timeout_s=0.01))
    await asyncio.sleep(0)
    small = asyncio.create_task(budget.acquire(30, timeout_s=10))  # behind `late` in line

    assert await late is False
    assert await small  # the head of the line left: the next one fits
    assert budget.used == 90


async def test_a_cancelled_waiter_holds_nothing() -> None:
    budget = ByteBudget(100)
    assert await budget.acquire(100, timeout_s=0)
    waiter = asyncio.create_task(budget.acquire(10, timeout_s=10))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    budget.release(100)
    assert budget.used == 0
    assert budget.waiting == 0


async def test_a_waiter_cancelled_after_it_was_granted_gives_the_bytes_back() -> None:
    budget = ByteBudget(100)
    assert await budget.acquire(100, timeout_s=0)
    waiter = asyncio.create_task(budget.acquire(40, timeout_s=10))
    await asyncio.sleep(0)
    budget.release(100)  # grants the waiter; it has not run yet
    waiter.cancel()  # and is cancelled before it does: the bytes it was given go back
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert budget.used == 0


async def test_a_size_over_the_capacity_is_a_bug_not_a_wait() -> None:
    with pytest.raises(ValueError, match="can never fit"):
        await ByteBudget(10).acquire(11, timeout_s=1)
