"""Consumer-group streams: competing consumers with at-least-once delivery.

Each group stream runs two tasks feeding one buffer: a reader taking never-delivered
entries (``XREADGROUP``) and a claimer taking over deliveries whose visibility timeout
expired or that were nacked (dead-lettering those out of deliveries). Nacks made
through this process wake the claimers of that group at once; other processes notice
within ``claim_interval_seconds``.

Before either starts, the stream re-delivers what is still pending on its own consumer
id: a process restarted with a stable id resumes its previous life's deliveries at
once instead of waiting for their visibility timeout.

One consumer id, one stream: a stream opened with the id of a stream still open in this
process (a restarted agent reconnecting before its old connection was found dead)
supersedes it. The old one stops reading and claiming at once, its response ends, and
the new one re-delivers what the old one took, once the old one's reads have stopped.
Otherwise the old session would keep taking new deliveries for a client that is gone,
each lost until its visibility timeout.

Across processes (several event-service replicas on one Redis) the same holds: each
stream records its session id as its consumer id's newest (``EventLog.open_session``)
before it re-delivers anything, and a watcher checks every ``supersede_check_seconds``
that it is still the newest. An older stream that sees a newer id ends its response at
once and releases what it took and the newer stream has not re-delivered
(``EventLog.hand_over``). A read or claim in flight is let finish (cancelling it could
lose what Redis had already handed out) and what it returns is released after it. The
newer stream's claim loop takes them over within ``claim_interval_seconds`` instead of
waiting out their visibility timeout.

Flow control: at most ``prefetch`` deliveries are unsettled on one stream. Acks and
nacks made through this process free room at once; settlements made elsewhere (another
event-service replica, or a claim by another consumer) are noticed by asking the log
once the stream has been full for ``claim_interval_seconds``.

Time: the claim loop's interval, the wait for prefetch room and the supersede watcher
run on the session's ``clock``, which compares idle times the log measures on the same
clock (the in-memory log). Redis measures idle times on its own clock, so on Redis the
app gives sessions the system clock (``event_service.app.create_app``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterable, Sequence

from event_service.backends.base import Entry, EventLog
from event_service.fanout import Subscriber
from event_service.ids import ZERO_ID
from event_service.metrics import EventMetrics
from soorma_common.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("event_service.groups")

_cleanups: set[asyncio.Task[None]] = set()
_CLEANUP_WAIT = 2.0  # seconds the lifespan waits for them at shutdown


async def finish_cleanups() -> None:
    """Wait (bounded) for closed streams to drop their consumers: call before closing
    the event log, so no cleanup opens a connection on a closed pool."""
    if _cleanups:
        await asyncio.wait(list(_cleanups), timeout=_CLEANUP_WAIT)


Ref = tuple[str, str]


class GroupWaker:
    """Connects ack/nack requests to the group streams of this process.

    A nack wakes the claim loops of that (tenant, group) at once; an ack or nack frees
    prefetch room on the stream that delivered it.
    """

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], set[GroupSession]] = {}

    def register(self, session: GroupSession) -> list[GroupSession]:
        """Add ``session``; close and return the open sessions it supersedes (same id)."""
        sessions = self._sessions.setdefault((session.tenant, session.group), set())
        older = [s for s in sessions if s.consumer == session.consumer and s is not session]
        sessions.add(session)
        for old in older:
            log.warning(
                "group %s: consumer %s opened a new stream (session %d) while its session "
                "%d was open; closing the old one",
                session.group,
                session.consumer,
                session.number,
                old.number,
            )
            old.supersede()
        return older

    def unregister(self, session: GroupSession) -> None:
        key = (session.tenant, session.group)
        sessions = self._sessions.get(key)
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del self._sessions[key]

    def wake(self, tenant: str, group: str) -> None:
        """Nacked deliveries are claimable: let every claim loop look now."""
        for session in self._sessions.get((tenant, group), ()):
            session.nacked.set()

    def settled(self, tenant: str, group: str, refs: Sequence[Ref]) -> None:
        """Deliveries were acked or nacked: they no longer count against prefetch."""
        for session in self._sessions.get((tenant, group), ()):
            session.settle(refs)


class GroupSession:
    """The background work behind one group-mode SSE stream."""

    _numbers = 0

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
        hard_cap: int | None = None,
        prefetch: int,
        batch: int,
        block: float,
        claim_interval: float,
        check_interval: float = 1.0,
        metrics: EventMetrics | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.log = log
        self.clock = clock
        self.tenant = tenant
        self.topics = list(topics)
        self.group = group
        self.consumer = consumer
        self.visibility_timeout = visibility_timeout
        self.max_deliveries = max_deliveries
        # Set when the client reports handler starts: see backends.burial.
        self.hard_cap = hard_cap
        self.prefetch = prefetch
        self.batch = batch
        self.block = block
        self.claim_interval = min(claim_interval, visibility_timeout / 2)
        self.check_interval = check_interval
        self.metrics = metrics
        self.sub = Subscriber(limit=1 << 62)  # bounded by back-pressure below instead
        self.drained = asyncio.Event()
        self.nacked = asyncio.Event()
        # Deliveries handed to this stream and not known to be settled.
        self.in_flight: set[Ref] = set()
        # Their delivery counts, for handing them over (shared logs only).
        self._counts: dict[Ref, int] = {}
        self.id = uuid.uuid4().hex
        # True once a newer stream of this consumer id opened in another process.
        self.handed_over = False
        self._announced = False
        self._reserved = 0  # room promised to a read in progress
        self._room = asyncio.Event()
        self._recovered = asyncio.Event()
        self._waker = waker
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        # Set when a newer stream with this consumer id replaced this one.
        self.superseded = False
        self._older: list[GroupSession] = []
        GroupSession._numbers += 1
        self.number = GroupSession._numbers

    def start(self) -> None:
        self._older = self._waker.register(self)
        log.info(
            "group %s: session %d opened for consumer %s (tenant %s, topics %s)",
            self.group,
            self.number,
            self.consumer,
            self.tenant,
            ",".join(self.topics),
        )
        self._tasks = [
            asyncio.create_task(self._read(), name=f"group-read:{self.group}"),
            asyncio.create_task(self._claim(), name=f"group-claim:{self.group}"),
        ]
        if self.log.shared:
            self._tasks.append(asyncio.create_task(self._watch(), name=f"group-watch:{self.group}"))

    def close(self) -> None:
        """Stop reading. Synchronous so it is safe in a cancelled generator's finally.

        Once the reads have stopped, the consumer is dropped from the group where it
        owns nothing pending, so per-connection consumer ids do not accumulate.
        Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        log.info(
            "group %s: session %d of consumer %s closed (%d deliveries unsettled%s)",
            self.group,
            self.number,
            self.consumer,
            len(self.in_flight),
            ", superseded" if self.superseded else "",
        )
        self._waker.unregister(self)
        if self.handed_over:
            # Reads and claims stop by themselves at their next step; one in flight
            # finishes, and what it returns is handed over too (see _forget).
            self._room.set()
            self.drained.set()
            self.nacked.set()
        else:
            for task in self._tasks:
                task.cancel()
        cleanup = asyncio.get_running_loop().create_task(self._forget(list(self._tasks)))
        _cleanups.add(cleanup)  # keep a reference until it is done
        cleanup.add_done_callback(_cleanups.discard)

    def supersede(self) -> None:
        """A newer stream with this consumer id took over: stop, and end the response."""
        self.superseded = True
        self.close()
        self.sub.wake.set()

    async def stopped(self) -> None:
        """Until this session's reads and claims have stopped."""
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def settle(self, refs: Iterable[Ref]) -> None:
        """Forget settled deliveries (acked, nacked, or filtered out by type)."""
        refs = list(refs)
        before = len(self.in_flight)
        self.in_flight.difference_update(refs)
        if self._counts:
            for ref in refs:
                self._counts.pop(ref, None)
        if len(self.in_flight) < before:
            self._room.set()

    async def _forget(self, tasks: list[asyncio.Task[None]]) -> None:
        # A read in flight may still hand this consumer deliveries: wait for it, so
        # the pending check below sees them and the consumer is kept.
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.handed_over:
            await self._hand_over()
            return
        if self.superseded:
            return  # the consumer id lives on in the newer stream
        if self._announced:
            with contextlib.suppress(Exception):  # best effort: the record expires
                await self.log.close_session(self.tenant, self.group, self.consumer, self.id)
        try:
            await self.log.forget_consumer(self.tenant, self.topics, self.group, self.consumer)
        except Exception as exc:  # best effort: a leftover consumer only costs memory
            log.warning(
                "could not drop consumer %s of group %s: %s", self.consumer, self.group, exc
            )

    async def _hand_over(self) -> None:
        """Release what this stream holds to the newer stream in another process."""
        held = {ref: self._counts.get(ref, 1) for ref in self.in_flight}
        if not held:
            return
        self.settle(list(held))  # this stream is done with them either way
        try:
            released = await self.log.hand_over(self.tenant, self.group, self.consumer, held)
        except Exception as exc:  # they still expire and are claimed like any other
            log.warning(
                "group %s: could not hand over %d deliveries of consumer %s: %s",
                self.group,
                len(held),
                self.consumer,
                exc,
            )
            return
        log.info(
            "group %s: session %d of consumer %s handed over %d of %d deliveries",
            self.group,
            self.number,
            self.consumer,
            released,
            len(held),
        )

    async def _watch(self) -> None:
        """Hand over as soon as a newer stream of this consumer id opened elsewhere."""
        while True:
            await self.clock.sleep(self.check_interval)
            if not self._announced:
                continue
            try:
                newest = await self.log.newest_session(self.tenant, self.group, self.consumer)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("group %s: session check failed: %s", self.group, exc)
                continue
            if newest is not None and newest != self.id:
                log.warning(
                    "group %s: consumer %s opened a newer stream in another process; "
                    "session %d hands over and closes",
                    self.group,
                    self.consumer,
                    self.number,
                )
                self.handed_over = self.superseded = True
                self.close()
                self.sub.wake.set()
                # What it holds now goes at once; what a read still in flight returns
                # follows once that read is done (_forget).
                await self._hand_over()
                return

    async def _backpressure(self) -> None:
        # Taking more than the client can write would only pin deliveries to a slow
        # consumer until their visibility timeout; let other replicas have them.
        while len(self.sub.buffer) >= self.batch and not self._closed:
            self.drained.clear()
            await self.drained.wait()

    async def _reconcile(self) -> None:
        """Drop from ``in_flight`` what was settled elsewhere or taken over."""
        if not self.in_flight:
            return
        held = list(self.in_flight)
        try:
            pending = await self.log.still_pending(self.tenant, self.group, self.consumer, held)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pending check failed for group %s; retrying", self.group)
            return
        self.settle(ref for ref in held if ref not in pending)

    async def _take_room(self, wanted: int, *, reserve: bool = True) -> int:
        """Up to ``wanted`` deliveries of prefetch room, waiting until there is some.

        Claims reserve their room while they run. The reader does not: it may block
        for ``block_seconds`` and must not keep claims from taking over expired work
        meanwhile, so a read that returns just as a claim delivered can briefly put
        up to ``prefetch`` more in flight.
        """
        while True:
            room = self.prefetch - len(self.in_flight) - self._reserved
            if self._closed:
                return 0  # handing over: take nothing more
            if room > 0:
                taken = min(room, wanted)
                if reserve:
                    self._reserved += taken
                return taken
            self._room.clear()
            try:
                await self.clock.wait_for(self._room.wait(), self.claim_interval)
            except TimeoutError:
                await self._reconcile()

    def _deliver(self, entries: Sequence[Entry], *, again: bool = False) -> None:
        if entries:
            if again and self.metrics is not None:
                self.metrics.redelivered(self.tenant, len(entries))
            self.in_flight.update((e.topic, e.id) for e in entries)
            if self.log.shared:
                self._counts.update(((e.topic, e.id), e.deliveries) for e in entries)
            self.sub.push(entries)

    async def _read(self) -> None:
        await self._recovered.wait()
        while not self._closed:
            await self._backpressure()
            room = await self._take_room(self.batch, reserve=False)
            if room < 1:
                break  # closed
            try:
                entries = await self.log.read_group(
                    self.tenant,
                    self.topics,
                    self.group,
                    self.consumer,
                    count=room,
                    block=self.block,
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group read failed for group %s; retrying", self.group)
                await asyncio.sleep(0.5)
                continue
            self._deliver(entries)

    async def _recover_own(self) -> None:
        """Re-deliver what is pending on this consumer id (a previous life's work)."""
        for topic in self.topics:
            cursor: str | None = ZERO_ID
            while cursor is not None and not self._closed:
                await self._backpressure()
                room = await self._take_room(self.batch)
                if room < 1:
                    break  # closed
                try:
                    entries, cursor = await self.log.claim_own(
                        self.tenant,
                        topic,
                        self.group,
                        self.consumer,
                        after=cursor,
                        max_deliveries=self.max_deliveries,
                        count=room,
                        hard_cap=self.hard_cap,
                    )
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception(
                        "could not resume pending deliveries of %s in group %s",
                        self.consumer,
                        self.group,
                    )
                    break  # they still expire and are claimed like any other
                finally:
                    self._reserved -= room
                self._deliver(entries, again=True)

    async def _announce(self) -> None:
        """Record this stream as its consumer id's newest, for streams in other processes.

        Before anything is re-delivered: an older stream elsewhere either still held a
        delivery when ``_recover_own`` looked (re-delivered here), or takes it after this
        record was written and hands it over once its watcher sees the record.
        """
        try:
            await self.log.open_session(self.tenant, self.group, self.consumer, self.id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # no cross-process takeover for this stream
            log.warning(
                "group %s: could not record session of consumer %s: %s",
                self.group,
                self.consumer,
                exc,
            )
            return
        self._announced = True

    async def _claim(self) -> None:
        try:
            if self.log.shared:
                await self._announce()
            if self._older:
                # What they took for this consumer id is re-delivered below; a read
                # they had in flight may still add to it, so wait for them first.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.block + 1.0):
                        await asyncio.gather(*(old.stopped() for old in self._older))
                self._older = []
            await self._recover_own()
        finally:
            self._recovered.set()
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                await self.clock.wait_for(self.nacked.wait(), self.claim_interval)
            self.nacked.clear()
            for topic in self.topics:
                await self._backpressure()
                room = await self._take_room(self.batch)
                if room < 1:
                    break  # closed
                try:
                    entries = await self.log.claim_expired(
                        self.tenant,
                        topic,
                        self.group,
                        self.consumer,
                        min_idle=self.visibility_timeout,
                        max_deliveries=self.max_deliveries,
                        count=room,
                        hard_cap=self.hard_cap,
                    )
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("claim failed for group %s; retrying", self.group)
                    await asyncio.sleep(0.5)
                    continue
                finally:
                    self._reserved -= room
                self._deliver(entries, again=True)
