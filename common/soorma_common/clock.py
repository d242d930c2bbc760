"""Time as a dependency: code that waits (leases, claims, timeouts, batching) takes a
:class:`Clock`, so tests can move time forward instead of sleeping through it.

:data:`SYSTEM_CLOCK` is the real thing and every default. :class:`ManualClock` is the
test double: its time stands still until the test calls :meth:`ManualClock.advance`,
which wakes the sleepers that fall due, earliest first, as if that much time had passed.

    clock = ManualClock()
    batcher = AckBatcher(bus=bus, group="g", window=5.0, clock=clock)
    batcher.ack("1")
    await clock.sleeping()  # the batcher is waiting out its window
    await clock.advance(5.0)  # ... which is over now: the ack goes out
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """What waiting code asks of time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (only differences mean anything)."""
        ...

    def time(self) -> float:
        """The wall-clock time in seconds since the epoch."""
        ...

    def now(self) -> datetime:
        """The wall-clock time, timezone-aware UTC."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return after ``seconds`` (at once when ``seconds <= 0``, after one turn of the
        event loop)."""
        ...

    async def wait_for(self, aw: Awaitable[T], seconds: float | None) -> T:
        """``aw``'s result, or :class:`TimeoutError` once ``seconds`` passed first (``aw``
        is then cancelled). ``None`` waits as long as it takes."""
        ...


class SystemClock:
    """Real time: :func:`time.monotonic`, :func:`time.time`, :func:`asyncio.sleep`."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))

    async def wait_for(self, aw: Awaitable[T], seconds: float | None) -> T:
        async with asyncio.timeout(seconds):
            return await aw

    def __repr__(self) -> str:
        return "SYSTEM_CLOCK"


#: The clock every ``clock=`` parameter defaults to.
SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when told to (:meth:`advance`); for tests.

    Sleeps end in the order of their deadlines (ties in the order they began), each
    woken sleeper gets to run before the next one wakes, and a sleep that starts while
    :meth:`advance` runs is woken too if it falls due within the same advance. Nothing
    here depends on how fast the machine is.

    Args:
        start: The wall-clock time at monotonic zero; by default the real time when the
            clock is made, so it lines up with timestamps taken by code that reads the
            real clock (an event's ``time``, a database default).
        settle_turns: Event-loop turns :meth:`advance` lets pass after each wake-up, so
            the woken code can run up to its next wait.
    """

    def __init__(self, *, start: datetime | None = None, settle_turns: int = 20) -> None:
        self._start = start or datetime.now(UTC)
        if self._start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        self._settle_turns = settle_turns
        self._monotonic = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._changed: asyncio.Event | None = None

    def monotonic(self) -> float:
        return self._monotonic

    def time(self) -> float:
        return self._start.timestamp() + self._monotonic

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._monotonic)

    @property
    def sleepers(self) -> int:
        """Sleeps that have begun and not ended (nor been cancelled)."""
        return sum(1 for _, _, waiter in self._sleepers if not waiter.done())

    def next_deadline(self) -> float | None:
        """The monotonic time the earliest pending sleep ends at (``None``: none)."""
        self._drop_ended()
        return self._sleepers[0][0] if self._sleepers else None

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._monotonic + seconds, next(self._order), waiter))
        self._notify()
        await waiter

    async def wait_for(self, aw: Awaitable[T], seconds: float | None) -> T:
        if seconds is None:
            return await aw
        work = asyncio.ensure_future(aw)
        timer = asyncio.ensure_future(self.sleep(seconds))
        timed_out = False
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not work.done():
                timed_out = True
                work.cancel()
                # Let the cancelled work unwind before the caller goes on.
                await asyncio.wait({work})
        if timed_out and work.cancelled():
            raise TimeoutError
        return work.result()

    async def sleeping(self, count: int = 1, *, within: float = 10.0) -> None:
        """Return once at least ``count`` sleeps are pending: the code under test has
        reached its wait. ``within`` (real seconds) bounds how long that may take."""
        async with asyncio.timeout(within):
            while self.sleepers < count:
                changed = self._changed = self._changed or asyncio.Event()
                changed.clear()
                await changed.wait()

    async def advance(self, seconds: float) -> None:
        """Move time ``seconds`` forward, waking every sleep due by then, earliest first."""
        if seconds < 0:
            raise ValueError("time does not go back")
        target = self._monotonic + seconds
        await self._settle()
        while True:
            self._drop_ended()
            if not self._sleepers or self._sleepers[0][0] > target:
                break
            due, _, waiter = heapq.heappop(self._sleepers)
            self._monotonic = max(self._monotonic, due)
            waiter.set_result(None)
            await self._settle()
        self._monotonic = target
        await self._settle()

    async def run_until_idle(self, *, limit: float = 86_400.0) -> None:
        """Advance to each next deadline until no sleep is pending (at most ``limit``
        seconds in all): for code that must run to its end however long it waits."""
        end = self._monotonic + limit
        while (due := self.next_deadline()) is not None and due <= end:
            await self.advance(due - self._monotonic)

    def _drop_ended(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def _settle(self) -> None:
        for _ in range(self._settle_turns):
            await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"ManualClock(monotonic={self._monotonic:g}, sleepers={self.sleepers})"
