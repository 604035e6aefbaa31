"""`WeightVersions`: the gate every model call passes, and what its stamps mean."""

from __future__ import annotations

import asyncio

from ng_cli.upstream.versions import WeightVersions


async def test_a_call_is_stamped_with_the_versions_at_dispatch_and_at_completion() -> None:
    versions = WeightVersions(3, server="m")
    async with versions.call() as ticket:
        assert versions.in_flight() == [ticket.call_id]
        spanning = versions.set_version(4)
        stamp = ticket.stamp()
    assert stamp == {"start": 3, "end": 4, "call": ticket.call_id}
    assert spanning == [ticket.call_id]
    assert versions.in_flight() == []


async def test_a_closed_gate_holds_new_calls_until_it_opens() -> None:
    versions = WeightVersions()
    versions.close()
    admitted = asyncio.Event()

    async def one_call() -> dict[str, int | str]:
        async with versions.call() as ticket:
            admitted.set()
            return ticket.stamp()

    task = asyncio.create_task(one_call())
    await asyncio.sleep(0)  # the call reaches the gate
    for _ in range(5):
        await asyncio.sleep(0)
    assert not admitted.is_set()
    versions.set_version(1)
    versions.open()
    stamp = await task
    assert stamp["start"] == stamp["end"] == 1  # admitted after the update: wholly the new version
