"""An agent's timed work (ack batching, lease renewal and start reports, a claim's
renewal and the wait for a claim held elsewhere) runs on the clock it is given: with a
manual clock a test moves time forward instead of waiting for it.

In-process (``PlatformHarness``: the real event and memory services, no ports); the
service's own counts (pending deliveries, a claim's holder) are the proof.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from soorma import PlatformContext
from soorma.agents._acks import AckBatcher
from soorma.agents._claims import Once
from soorma.agents._leases import MARK_DELAY, MARK_GAP, LeaseRenewer
from soorma.testing import PlatformHarness
from soorma_common.clock import ManualClock

pytestmark = pytest.mark.asyncio

TOPIC = "action-requests"
GROUP = "clocked"


@pytest_asyncio.fixture
async def platform() -> AsyncIterator[PlatformHarness]:
    async with PlatformHarness() as running:
        yield running


async def pending(context: PlatformContext) -> int:
    groups = await context.bus.consumer_groups(group=GROUP, topics=[TOPIC])
    return sum(g.pending for g in groups.groups)


async def settled(context: PlatformContext) -> None:
    """Return once the service holds no delivery of the group unacknowledged."""
    async with asyncio.timeout(10):
        while True:
            if not await pending(context):
                return
            await asyncio.sleep(0.01)


async def deliveries(context: PlatformContext, n: int) -> list[str]:
    """Publish ``n`` events and take them as the group: their delivery ids."""
    ids: list[str] = []
    async with context.bus.subscribe([TOPIC], group=GROUP) as stream:
        await stream.wait_ready()
        for i in range(n):
            await context.bus.publish(TOPIC, "job.requested", {"n": i})
        async with asyncio.timeout(10):
            async for event in stream:
                ids.append(str(event.delivery_id))
                if len(ids) == n:
                    break
    return ids


class Recorder:
    """The bus, with a record of the lease renewals sent through it."""

    def __init__(self, context: PlatformContext) -> None:
        self.bus = context.bus
        self.extends: list[tuple[list[str], list[str]]] = []

    async def extend(self, group: str, ids: Any, *, running: Any = ()) -> Any:
        self.extends.append((sorted(ids), sorted(running)))
        return await self.bus.extend(group, ids, running=running)


async def test_acks_wait_out_the_window_on_the_clock_then_settle(
    platform: PlatformHarness,
) -> None:
    context = platform.context
    ids = await deliveries(context, 2)
    assert await pending(context) == 2
    clock = ManualClock()
    batcher = AckBatcher(bus=context.bus, group=GROUP, window=60.0, clock=clock)
    for delivery_id in ids:
        batcher.ack(delivery_id)
    await clock.sleeping()  # the window has begun
    await clock.advance(59.0)
    assert batcher.pending == 2 and await pending(context) == 2
    await clock.advance(1.0)
    await settled(context)
    assert batcher.pending == 0
    await batcher.close()


async def test_a_full_batch_goes_out_without_waiting_for_the_clock(
    platform: PlatformHarness,
) -> None:
    context = platform.context
    ids = await deliveries(context, 3)
    clock = ManualClock()
    batcher = AckBatcher(bus=context.bus, group=GROUP, window=60.0, max_batch=3, clock=clock)
    for delivery_id in ids:
        batcher.ack(delivery_id)
    await settled(context)
    assert clock.monotonic() == 0.0  # no time passed
    await batcher.close()


async def test_leases_are_renewed_every_third_of_the_visibility_timeout_and_starts_reported(
    platform: PlatformHarness,
) -> None:
    context = platform.context
    first, second = await deliveries(context, 2)
    clock = ManualClock()
    bus = Recorder(context)
    renewer = LeaseRenewer(name="a", group=GROUP, visibility_timeout=30.0, clock=clock)
    renewer.held.update({first, second})
    renewer.start(bus)  # type: ignore[arg-type]
    try:
        await clock.sleeping()
        await clock.advance(9.9)
        assert bus.extends == []
        await clock.advance(0.1)  # a third of 30 s: everything held is renewed
        await clock.sleeping()
        assert bus.extends == [(sorted([first, second]), [])]
        # A start is reported soon, not at the next renewal: MARK_DELAY after it, but
        # no sooner than MARK_GAP after the last request (the renewal, just now).
        renewer.started(first)
        await clock.sleeping()
        await clock.advance(MARK_DELAY)
        assert len(bus.extends) == 1
        await clock.advance(MARK_GAP - MARK_DELAY)
        await clock.sleeping()
        assert bus.extends[-1] == ([first], [first])
        renewer.release(first)  # handled: no longer renewed
        await clock.advance(19.9 - clock.monotonic())
        assert len(bus.extends) == 2
        await clock.advance(0.1)  # the next third of the timeout
        await clock.sleeping()
        assert bus.extends[-1] == ([second], [])
        assert len(bus.extends) == 3
        assert await pending(context) == 2  # renewed, never settled
    finally:
        await renewer.stop()


async def test_a_claim_held_elsewhere_is_waited_for_on_the_clock_until_it_is_given_back(
    platform: PlatformHarness,
) -> None:
    context = platform.context
    memory = context.memory
    assert memory is not None
    held = await memory.claim_request("k:1", "another-replica", lease_seconds=300)
    assert held.status == "granted"
    clock = ManualClock()
    turn = asyncio.create_task(
        Once.begin(memory, "k:1", retention=60, record_wait=1, who="t", lease=30, clock=clock)
    )
    await clock.sleeping()  # it looked, found the claim held, and waits on the clock
    await clock.advance(5.0)
    await clock.sleeping()
    assert not turn.done()  # still held: it keeps waiting, never runs meanwhile
    await memory.release_claim("k:1", "another-replica")  # the holder gives it back
    await clock.advance(1.0)  # the next look (backoff at most 1 s) takes it
    async with asyncio.timeout(10):
        once = await turn
    try:
        assert once.recorded is None  # this delivery now runs the request
        await clock.sleeping()  # its own claim is renewed on the clock
        again = await memory.claim_request("k:1", "third", lease_seconds=30)
        assert (again.status, again.owner) == ("held", once._claim.owner)  # type: ignore[union-attr]
    finally:
        await once.release()
