"""The clock waiting code takes: the system clock is real time, the manual clock moves
only when a test advances it, waking sleepers in deadline order."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from soorma_common.clock import SYSTEM_CLOCK, Clock, ManualClock

pytestmark = pytest.mark.asyncio

START = datetime(2030, 1, 1, tzinfo=UTC)


async def test_both_clocks_are_clocks() -> None:
    assert isinstance(SYSTEM_CLOCK, Clock)
    assert isinstance(ManualClock(), Clock)


async def test_system_clock_reads_and_waits_in_real_time() -> None:
    before = datetime.now(UTC)
    assert SYSTEM_CLOCK.now() >= before and SYSTEM_CLOCK.now().tzinfo is not None
    assert SYSTEM_CLOCK.time() >= before.timestamp()
    first = SYSTEM_CLOCK.monotonic()
    await SYSTEM_CLOCK.sleep(0.01)
    assert SYSTEM_CLOCK.monotonic() > first
    await SYSTEM_CLOCK.sleep(-1)  # a negative sleep returns at once
    assert await SYSTEM_CLOCK.wait_for(asyncio.sleep(0, "done"), 1.0) == "done"
    with pytest.raises(TimeoutError):
        await SYSTEM_CLOCK.wait_for(asyncio.Event().wait(), 0.01)


async def test_manual_time_stands_still_until_advanced() -> None:
    clock = ManualClock(start=START)
    assert (clock.monotonic(), clock.now(), clock.time()) == (0.0, START, START.timestamp())
    await clock.advance(2.5)
    assert clock.monotonic() == 2.5
    assert clock.now() == START + timedelta(seconds=2.5)
    assert clock.time() == START.timestamp() + 2.5
    with pytest.raises(ValueError):
        await clock.advance(-1)
    with pytest.raises(ValueError):
        ManualClock(start=datetime(2030, 1, 1))  # naive


async def test_by_default_the_wall_time_starts_at_the_real_time() -> None:
    before = datetime.now(UTC)
    assert before <= ManualClock().now() <= datetime.now(UTC)


async def test_advance_wakes_due_sleepers_in_deadline_order_at_their_deadline() -> None:
    clock = ManualClock()
    woke: list[tuple[str, float]] = []

    async def nap(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.monotonic()))

    tasks = [asyncio.create_task(nap(n, s)) for n, s in [("c", 3), ("a", 1), ("b", 2), ("d", 9)]]
    await clock.sleeping(4)
    assert clock.next_deadline() == 1
    await clock.advance(0.5)
    assert woke == []
    await clock.advance(2.5)
    assert woke == [("a", 1.0), ("b", 2.0), ("c", 3.0)]
    assert clock.sleepers == 1 and clock.monotonic() == 3.0
    await clock.advance(6)
    assert woke[-1] == ("d", 9.0)
    await asyncio.gather(*tasks)


async def test_a_sleep_begun_during_an_advance_wakes_within_it() -> None:
    clock = ManualClock()
    beats: list[float] = []

    async def every_second() -> None:
        while True:
            await clock.sleep(1)
            beats.append(clock.monotonic())

    task = asyncio.create_task(every_second())
    await clock.sleeping()
    await clock.advance(3.5)
    assert beats == [1.0, 2.0, 3.0]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert clock.sleepers == 0


async def test_a_cancelled_sleep_is_forgotten() -> None:
    clock = ManualClock()
    task = asyncio.create_task(clock.sleep(5))
    await clock.sleeping()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert clock.sleepers == 0 and clock.next_deadline() is None
    await clock.advance(10)


async def test_wait_for_returns_the_result_before_the_timeout() -> None:
    clock = ManualClock()
    ready = asyncio.Event()
    waiting = asyncio.create_task(clock.wait_for(ready.wait(), 5))
    await clock.sleeping()
    await clock.advance(4.9)
    assert not waiting.done()
    ready.set()
    assert await waiting is True
    assert clock.sleepers == 0  # its timer is gone


async def test_wait_for_times_out_when_time_runs_out_and_cancels_the_work() -> None:
    clock = ManualClock()
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    waiting = asyncio.create_task(clock.wait_for(forever(), 5))
    await clock.sleeping()
    await clock.advance(5)
    with pytest.raises(TimeoutError):
        await waiting
    assert cancelled.is_set()
    assert await clock.wait_for(asyncio.sleep(0, "none"), None) == "none"


async def test_sleeping_gives_up_after_its_real_time_bound() -> None:
    with pytest.raises(TimeoutError):
        await ManualClock().sleeping(within=0.01)


async def test_run_until_idle_advances_through_every_pending_sleep() -> None:
    clock = ManualClock()

    async def twice() -> None:
        await clock.sleep(60)
        await clock.sleep(3600)

    task = asyncio.create_task(twice())
    await clock.sleeping()
    await clock.run_until_idle()
    assert task.done() and clock.monotonic() == 3660
