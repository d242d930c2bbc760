"""The projector: reads the platform tap with consumer group ``tracker``, projects each batch in
one transaction and acks it after the commit.

Replicas share the group's work; an event whose replica died before acking is redelivered
after the visibility timeout, and its second projection is a no-op (dedupe by event id).
A batch that fails as a whole is retried event by event, so one bad event is counted and
skipped without blocking the ones behind it; a database that is down stops the projector
(nothing acked) until it is back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from soorma.bus import BusClient
from soorma.event import Event
from tracker_service.projection import BatchResult, bump, project

log = logging.getLogger("tracker_service.projector")

GROUP = "tracker"
TAP_TOPICS = (
    "system-events",
    "action-requests",
    "action-results",
    "plan-events",
    "task-events",
    "notification-events",
)
MAX_ACK = 1000
MAX_PREFETCH = 1000
RETRY_SECONDS = 1.0


# Lock wait timed out, statement cancelled, server shutting down: retry, never skip.
_TRANSIENT_SQLSTATES = frozenset({"55P03", "57014", "57P01", "57P02", "57P03", "40001", "40P01"})


def _is_outage(exc: BaseException) -> bool:
    """A database problem to wait out (the events are fine), not a bad event."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return state in _TRANSIENT_SQLSTATES or "database is locked" in str(orig)


class Projector:
    """Consumes the tap into the tracker's tables.

    Args:
        engine: The tracker's (migrated) database.
        bus: A bus client acting as a platform service (``X-Soorma-Role: service``).
        consumer: This replica's consumer id in group ``tracker``.
        batch: Most events per transaction.
        batch_wait: Seconds a batch waits to fill once it has its first event.
        visibility_timeout: Seconds before an unacked event goes to another replica.
        on_batch: Called after each committed batch (tests, stream wake-ups).
    """

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        bus: BusClient,
        consumer: str,
        batch: int = 500,
        batch_wait: float = 0.02,
        visibility_timeout: float = 30.0,
        on_batch: Callable[[BatchResult], Awaitable[None] | None] | None = None,
    ) -> None:
        self.engine = engine
        self.bus = bus
        self.consumer = consumer
        self.batch = batch
        self.batch_wait = batch_wait
        self.visibility_timeout = visibility_timeout
        self.on_batch = on_batch
        self.ready = asyncio.Event()
        self._acking: asyncio.Task[None] | None = None

    async def _ack(self, ids: list[str], previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        try:
            for start in range(0, len(ids), MAX_ACK):
                await self.bus.ack(GROUP, ids[start : start + MAX_ACK], tenant_id="*")
        except Exception as exc:  # redelivered after the visibility timeout: deduped then
            log.warning("ack of %d deliveries failed: %s", len(ids), exc)

    async def run(self) -> None:
        """Consume until cancelled, reconnecting after errors."""
        try:
            while True:
                try:
                    await self._consume()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("tracker projector: %s; retrying in %.0f s", exc, RETRY_SECONDS)
                    await asyncio.sleep(RETRY_SECONDS)
        finally:
            if self._acking is not None:  # let the last committed batch's ack go out
                await asyncio.wait([self._acking], timeout=1)

    async def _consume(self) -> None:
        async with self.bus.subscribe(
            list(TAP_TOPICS),
            group=GROUP,
            consumer=self.consumer,
            tenant_id="*",
            start_from="earliest",
            visibility_timeout=self.visibility_timeout,
            buffer=max(64, self.batch * 2),
        ) as sub:
            # Unacked deliveries in flight: a whole batch, and the next one reading ahead.
            sub.params["prefetch"] = min(MAX_PREFETCH, self.batch * 2)
            await sub.wait_ready()
            self.ready.set()
            while True:
                first = await anext(sub)
                events = [first, *sub.take(self.batch - 1)]
                if len(events) < self.batch and self.batch_wait > 0:
                    await asyncio.sleep(self.batch_wait)
                    events.extend(sub.take(self.batch - len(events)))
                await self.handle(events)
                if self._acking is not None and self._acking.done():
                    self._acking = None

    async def handle(self, events: Sequence[Event]) -> BatchResult:
        """Project ``events`` (retrying while the database is down), then ack them."""
        while True:
            try:
                result = await self._project(events)
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not _is_outage(exc):
                    raise
                log.warning("tracker database unavailable (%s); retrying", exc)
                await asyncio.sleep(RETRY_SECONDS)
        # Acked once committed; the ack's round trip overlaps the next batch's projection
        # (acks still leave in commit order: each waits for the previous one).
        ids = [e.delivery_id for e in events if e.delivery_id]
        previous = self._acking
        self._acking = asyncio.create_task(self._ack(ids, previous))
        if self.on_batch is not None:
            maybe = self.on_batch(result)
            if maybe is not None:
                await maybe
        return result

    async def _project(self, events: Sequence[Event]) -> BatchResult:
        try:
            async with self.engine.begin() as conn:
                return await project(conn, events)
        except Exception as exc:
            if _is_outage(exc) or len(events) == 1:
                if len(events) == 1 and not _is_outage(exc):
                    return await self._skip(events[0], exc)
                raise
            log.warning("batch of %d failed (%s); projecting one by one", len(events), exc)
        total = BatchResult()
        for event in events:
            try:
                async with self.engine.begin() as conn:
                    one = await project(conn, [event])
            except Exception as exc:
                if _is_outage(exc):
                    raise
                one = await self._skip(event, exc)
            total.projected += one.projected
            total.duplicates += one.duplicates
            total.malformed += one.malformed
            total.plan_keys |= one.plan_keys
        return total

    async def _skip(self, event: Any, exc: BaseException) -> BatchResult:
        log.warning(
            "skipping event %s that cannot be projected: %s", getattr(event, "id", "?"), exc
        )
        async with self.engine.begin() as conn:
            await bump(conn, malformed=1)
        return BatchResult(malformed=1)
