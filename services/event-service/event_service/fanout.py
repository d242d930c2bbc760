"""Broadcast fan-out: one backend reader per (tenant, topic) per process.

However many SSE clients follow a topic, the process runs one blocking read for it and
hands every batch to all local subscribers. A subscriber that starts behind the reader
(resume, or "now" taken before the reader existed) first reads its gap straight from
the log, then continues from the reader's batches; comparing stream ids makes the
handover gap-free and duplicate-free.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Sequence

from event_service.backends.base import Entry, EventLog

log = logging.getLogger("event_service.fanout")


class Subscriber:
    """Buffer between topic readers and one SSE response."""

    __slots__ = ("buffer", "limit", "overflowed", "wake")

    def __init__(self, *, limit: int) -> None:
        self.buffer: deque[Entry] = deque()
        self.wake = asyncio.Event()
        self.limit = limit
        self.overflowed = False

    def push(self, entries: Sequence[Entry]) -> None:
        if self.overflowed:
            return
        self.buffer.extend(entries)
        if len(self.buffer) > self.limit:
            # Too slow to keep up: drop the buffer; the stream re-reads from the log.
            self.overflowed = True
            self.buffer.clear()
        self.wake.set()


class _Reader:
    __slots__ = ("key", "position", "subscribers", "task")

    def __init__(self, key: tuple[str, str], position: str) -> None:
        self.key = key
        self.position = position
        self.subscribers: set[Subscriber] = set()
        self.task: asyncio.Task[None] | None = None


class BroadcastHub:
    """Shares one live reader per (tenant, topic) among all local subscribers."""

    def __init__(self, *, log: EventLog, batch: int, block: float) -> None:
        self._log = log
        self._batch = batch
        self._block = block
        self._readers: dict[tuple[str, str], _Reader] = {}

    def attach(self, tenant: str, topic: str, sub: Subscriber, live_from: str) -> str:
        """Register ``sub`` for ``topic``; returns the reader's position ``R``.

        Every entry after ``R`` reaches ``sub.buffer``; entries up to ``R`` are the
        caller's to read from the log. A new reader starts at ``live_from`` (a recent
        "now"), so one subscriber resuming from far back never delays the others.
        """
        key = (tenant, topic)
        reader = self._readers.get(key)
        if reader is None:
            reader = self._readers[key] = _Reader(key, live_from)
            reader.task = asyncio.create_task(self._run(reader), name=f"fanout:{topic}")
        reader.subscribers.add(sub)
        return reader.position

    def detach(self, tenant: str, topic: str, sub: Subscriber) -> None:
        reader = self._readers.get((tenant, topic))
        if reader is not None:
            reader.subscribers.discard(sub)

    async def _run(self, reader: _Reader) -> None:
        tenant, topic = reader.key
        while True:
            try:
                entries = await self._log.read_live(
                    tenant, topic, after=reader.position, count=self._batch, block=self._block
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fan-out read failed for topic %s; retrying", topic)
                entries = []
                await asyncio.sleep(0.5)
            if entries:
                reader.position = entries[-1].id
                for sub in list(reader.subscribers):
                    sub.push(entries)
                # Let the woken streams write their SSE chunks before this task sends
                # its next XREAD: delivery latency should not include that syscall.
                await asyncio.sleep(0)
            if not reader.subscribers:
                # Decided and removed in one step, so a concurrent attach either found
                # this reader (and we would not be here) or creates a fresh one.
                if self._readers.get(reader.key) is reader:
                    del self._readers[reader.key]
                return

    async def close(self) -> None:
        readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            if reader.task is not None:
                reader.task.cancel()
        for reader in readers:
            if reader.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader.task
