"""Consumer-group streams: competing consumers with at-least-once delivery.

Each group stream runs two tasks feeding one buffer: a reader taking never-delivered
entries (``XREADGROUP``) and a claimer taking over deliveries whose visibility timeout
expired or that were nacked (dead-lettering those out of deliveries). Nacks made
through this process wake the claimers of that group at once; other processes notice
within ``claim_interval_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from event_service.backends.base import EventLog
from event_service.fanout import Subscriber

log = logging.getLogger("event_service.groups")

_cleanups: set[asyncio.Task[None]] = set()
_CLEANUP_WAIT = 2.0  # seconds the lifespan waits for them at shutdown


async def finish_cleanups() -> None:
    """Wait (bounded) for closed streams to drop their consumers: call before closing
    the event log, so no cleanup opens a connection on a closed pool."""
    if _cleanups:
        await asyncio.wait(list(_cleanups), timeout=_CLEANUP_WAIT)


class GroupWaker:
    """Lets a nack wake the claim loops of that (tenant, group) in this process."""

    def __init__(self) -> None:
        self._events: dict[tuple[str, str], set[asyncio.Event]] = {}

    def register(self, tenant: str, group: str) -> asyncio.Event:
        event = asyncio.Event()
        self._events.setdefault((tenant, group), set()).add(event)
        return event

    def unregister(self, tenant: str, group: str, event: asyncio.Event) -> None:
        events = self._events.get((tenant, group))
        if events is not None:
            events.discard(event)
            if not events:
                del self._events[(tenant, group)]

    def wake(self, tenant: str, group: str) -> None:
        for event in self._events.get((tenant, group), ()):
            event.set()


class GroupSession:
    """The background work behind one group-mode SSE stream."""

    def __init__(
        self,
        *,
        log: EventLog,
        waker: GroupWaker,
        tenant: str,
        topics: Sequence[str],
        group: str,
        consumer: str,
        visibility_timeout: float,
        max_deliveries: int,
        batch: int,
        block: float,
        claim_interval: float,
    ) -> None:
        self.log = log
        self.tenant = tenant
        self.topics = list(topics)
        self.group = group
        self.consumer = consumer
        self.visibility_timeout = visibility_timeout
        self.max_deliveries = max_deliveries
        self.batch = batch
        self.block = block
        self.claim_interval = min(claim_interval, visibility_timeout / 2)
        self.sub = Subscriber(limit=1 << 62)  # bounded by back-pressure below instead
        self.drained = asyncio.Event()
        self._waker = waker
        self._nacked = waker.register(tenant, group)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._read(), name=f"group-read:{self.group}"),
            asyncio.create_task(self._claim(), name=f"group-claim:{self.group}"),
        ]

    def close(self) -> None:
        """Stop reading. Synchronous so it is safe in a cancelled generator's finally.

        Once the reads have stopped, the consumer is dropped from the group where it
        owns nothing pending, so per-connection consumer ids do not accumulate.
        """
        self._waker.unregister(self.tenant, self.group, self._nacked)
        for task in self._tasks:
            task.cancel()
        cleanup = asyncio.get_running_loop().create_task(self._forget(list(self._tasks)))
        _cleanups.add(cleanup)  # keep a reference until it is done
        cleanup.add_done_callback(_cleanups.discard)

    async def _forget(self, tasks: list[asyncio.Task[None]]) -> None:
        # A read in flight may still hand this consumer deliveries: wait for it, so
        # the pending check below sees them and the consumer is kept.
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            await self.log.forget_consumer(self.tenant, self.topics, self.group, self.consumer)
        except Exception as exc:  # best effort: a leftover consumer only costs memory
            log.warning("could not drop consumer %s of group %s: %s",
                        self.consumer, self.group, exc)

    async def _backpressure(self) -> None:
        # Taking more than the client can write would only pin deliveries to a slow
        # consumer until their visibility timeout; let other replicas have them.
        while len(self.sub.buffer) >= self.batch:
            self.drained.clear()
            await self.drained.wait()

    async def _read(self) -> None:
        while True:
            await self._backpressure()
            try:
                entries = await self.log.read_group(
                    self.tenant, self.topics, self.group, self.consumer,
                    count=self.batch, block=self.block,
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group read failed for group %s; retrying", self.group)
                await asyncio.sleep(0.5)
                continue
            if entries:
                self.sub.push(entries)

    async def _claim(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.claim_interval):
                    await self._nacked.wait()
            self._nacked.clear()
            await self._backpressure()
            for topic in self.topics:
                try:
                    entries = await self.log.claim_expired(
                        self.tenant, topic, self.group, self.consumer,
                        min_idle=self.visibility_timeout,
                        max_deliveries=self.max_deliveries, count=self.batch,
                    )
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("claim failed for group %s; retrying", self.group)
                    await asyncio.sleep(0.5)
                    continue
                if entries:
                    self.sub.push(entries)
