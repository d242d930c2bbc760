"""The in-memory event log keeps its leases on the clock it is given: a delivery becomes
claimable by another consumer exactly when it has been idle for the visibility timeout,
a renewal starts that over, and a blocking read ends when its time is up."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from event_service.backends.base import NewEvent
from event_service.backends.memory import MemoryEventLog
from event_service.ids import parse_id
from soorma_common.clock import ManualClock

pytestmark = pytest.mark.asyncio

TENANT, TOPIC, GROUP = "acme", "jobs", "workers"
TIMEOUT = 30.0


async def delivered(log: MemoryEventLog, n: int = 1) -> list[str]:
    """Append ``n`` events and deliver them to consumer c1; their stream ids."""
    await log.ensure_group(TENANT, [TOPIC], GROUP, from_earliest=True)
    await log.append(TENANT, [NewEvent(TOPIC, "job", b"{}") for _ in range(n)])
    entries = await log.read_group(TENANT, [TOPIC], GROUP, "c1", count=n, block=0)
    return [e.id for e in entries]


async def expired(log: MemoryEventLog, consumer: str = "c2") -> list[str]:
    entries = await log.claim_expired(
        TENANT, TOPIC, GROUP, consumer, min_idle=TIMEOUT, max_deliveries=5, count=10
    )
    return [e.id for e in entries]


async def test_a_delivery_is_taken_over_when_its_lease_has_run_out_on_the_clock() -> None:
    clock = ManualClock()
    log = MemoryEventLog(clock=clock)
    (stream_id,) = await delivered(log)
    await clock.advance(TIMEOUT - 0.1)
    assert await expired(log) == []
    await clock.advance(0.1)
    assert await expired(log) == [stream_id]
    assert await expired(log, "c3") == []  # c2's lease starts now


async def test_a_renewed_lease_runs_a_whole_timeout_from_the_renewal() -> None:
    clock = ManualClock()
    log = MemoryEventLog(clock=clock)
    (stream_id,) = await delivered(log)
    await clock.advance(TIMEOUT - 1)
    done, _ = await log.extend(TENANT, GROUP, [(TOPIC, stream_id)], consumer="c1")
    assert done == 1
    await clock.advance(TIMEOUT - 0.1)
    assert await expired(log) == []
    await clock.advance(0.1)
    assert await expired(log) == [stream_id]


async def test_ids_carry_the_clocks_wall_time() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    clock = ManualClock(start=start)
    log = MemoryEventLog(clock=clock)
    (first,) = await log.append(TENANT, [NewEvent(TOPIC, "job", b"{}")])
    await clock.advance(2.5)
    (second,) = await log.append(TENANT, [NewEvent(TOPIC, "job", b"{}")])
    assert parse_id(first) == (int(start.timestamp() * 1000), 0)
    assert parse_id(second) == (int(start.timestamp() * 1000) + 2500, 0)


async def test_a_blocking_group_read_ends_when_its_time_is_up_on_the_clock() -> None:
    clock = ManualClock()
    log = MemoryEventLog(clock=clock)
    await log.ensure_group(TENANT, [TOPIC], GROUP, from_earliest=True)
    read = asyncio.create_task(log.read_group(TENANT, [TOPIC], GROUP, "c1", count=10, block=5.0))
    await clock.sleeping()
    await clock.advance(4.9)
    assert not read.done()
    await clock.advance(0.1)
    async with asyncio.timeout(5):
        assert await read == []


async def test_a_blocking_read_returns_what_is_appended_before_its_time_is_up() -> None:
    clock = ManualClock()
    log = MemoryEventLog(clock=clock)
    await log.ensure_group(TENANT, [TOPIC], GROUP, from_earliest=True)
    read = asyncio.create_task(log.read_group(TENANT, [TOPIC], GROUP, "c1", count=10, block=5.0))
    await clock.sleeping()
    (stream_id,) = await log.append(TENANT, [NewEvent(TOPIC, "job", b"{}")])
    async with asyncio.timeout(5):
        assert [e.id for e in await read] == [stream_id]
    assert clock.monotonic() == 0.0
