"""In-process event log: the embedded default (one process, nothing survives a restart)."""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from event_service.backends.base import (
    DeadEntry,
    Entry,
    EventLog,
    GroupStatus,
    LogStats,
    NewEvent,
)
from event_service.backends.burial import burial_reason
from event_service.ids import StreamKey, format_id, parse_id
from event_service.settings import TAP_TENANT
from soorma_common.clock import SYSTEM_CLOCK, Clock
from soorma_common.errors import EventNotFound
from soorma_common.events import DLQ_SUFFIX, dead_letter_topic

_GROUP_SLICE = 50


def _entry_key(entry: Entry) -> StreamKey:
    return entry.key


@dataclass(slots=True)
class _Pending:
    entry: Entry
    consumer: str
    delivered_at: float
    count: int = 1
    reason: str | None = None
    nacked: bool = False
    # Deliveries in which a handler was seen running, and the last such delivery.
    started: int = 0
    started_in: int = 0

    def mark_started(self) -> None:
        if self.started_in != self.count:
            self.started_in = self.count
            self.started += 1

    def burial(self, max_deliveries: int, hard_cap: int | None) -> str | None:
        return burial_reason(
            deliveries=self.count,
            started=self.started,
            max_deliveries=max_deliveries,
            hard_cap=hard_cap,
            nack_reason=self.reason,
        )


@dataclass(slots=True)
class _Group:
    last: StreamKey
    pending: dict[str, _Pending] = field(default_factory=dict)


@dataclass(slots=True)
class _Topic:
    entries: list[Entry] = field(default_factory=list)
    last: StreamKey = (0, 0)
    groups: dict[str, _Group] = field(default_factory=dict)
    # Only dead-letter topics use this: stream id -> (reason, deliveries, group, dead_at).
    dead: dict[str, tuple[str, int, str | None, datetime]] = field(default_factory=dict)

    def after(self, key: StreamKey) -> int:
        return bisect.bisect_right(self.entries, key, key=_entry_key)


class _Tenant:
    __slots__ = ("changed", "topics")

    def __init__(self) -> None:
        self.topics: dict[str, _Topic] = {}
        # Replaced on every append: waiters hold the old one, which gets set.
        self.changed = asyncio.Event()

    def topic(self, name: str) -> _Topic:
        found = self.topics.get(name)
        if found is None:
            found = self.topics[name] = _Topic()
        return found

    def notify(self) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()


class MemoryEventLog(EventLog):
    """Event log kept in process memory, bounded to ``max_length`` entries per topic.

    ``clock`` stamps the ids and times the leases (visibility, redelivery) and blocking
    reads, so a test can let a lease run out without waiting for it.
    """

    def __init__(
        self,
        *,
        max_length: int = 100_000,
        tap_topics: Iterable[str] = (),
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._clock = clock
        self._max_length = max_length
        self._tap = frozenset(tap_topics)
        self._tenants: dict[str, _Tenant] = {}
        self._closed = False

    def _tenant(self, tenant: str) -> _Tenant:
        found = self._tenants.get(tenant)
        if found is None:
            found = self._tenants[tenant] = _Tenant()
        return found

    def _add(self, topic_name: str, t: _Topic, event: NewEvent) -> Entry:
        now_ms = int(self._clock.time() * 1000)
        key = (now_ms, 0) if now_ms > t.last[0] else (t.last[0], t.last[1] + 1)
        t.last = key
        entry = Entry(topic_name, format_id(key), key, event.type, event.payload)
        t.entries.append(entry)
        # Trim in chunks so appends stay O(1) amortized.
        if len(t.entries) > self._max_length + max(1, self._max_length // 10):
            del t.entries[: len(t.entries) - self._max_length]
        return entry

    async def append(self, tenant: str, events: Sequence[NewEvent]) -> list[str]:
        state = self._tenant(tenant)
        ids = [self._add(e.topic, state.topic(e.topic), e).id for e in events]
        state.notify()
        tapped = [e for e in events if e.topic in self._tap]
        if tapped:
            tap = self._tenant(TAP_TENANT)
            for e in tapped:
                self._add(e.topic, tap.topic(e.topic), e)
            tap.notify()
        return ids

    async def last_ids(self, tenant: str, topics: Sequence[str]) -> dict[str, str]:
        state = self._tenant(tenant)
        return {name: format_id(state.topic(name).last) for name in topics}

    async def read_range(
        self, tenant: str, topic: str, *, after: str, upto: str, count: int
    ) -> list[Entry]:
        t = self._tenant(tenant).topic(topic)
        start = t.after(parse_id(after))
        stop = t.after(parse_id(upto))
        return t.entries[start : min(stop, start + count)]

    async def read_live(
        self, tenant: str, topic: str, *, after: str, count: int, block: float
    ) -> list[Entry]:
        state = self._tenant(tenant)
        key = parse_id(after)
        for attempt in range(2):
            t = state.topic(topic)
            if t.last > key:
                start = t.after(key)
                return t.entries[start : start + count]
            if attempt or self._closed:
                break
            try:
                await self._clock.wait_for(state.changed.wait(), block)
            except TimeoutError:
                break
        return []

    async def ensure_group(
        self, tenant: str, topics: Sequence[str], group: str, *, from_earliest: bool
    ) -> None:
        state = self._tenant(tenant)
        for name in topics:
            t = state.topic(name)
            if group not in t.groups:
                t.groups[group] = _Group(last=(0, 0) if from_earliest else t.last)

    def _take_new(
        self, state: _Tenant, topics: Sequence[str], group: str, consumer: str, count: int
    ) -> list[Entry]:
        out: list[Entry] = []
        now = self._clock.monotonic()
        for name in topics:
            t = state.topic(name)
            g = t.groups.get(group)
            if g is None:
                g = t.groups[group] = _Group(last=t.last)
            if t.last <= g.last:
                continue
            start = t.after(g.last)
            taken = t.entries[start : start + count - len(out)]
            for entry in taken:
                g.pending[entry.id] = _Pending(entry, consumer, now)
            if taken:
                g.last = taken[-1].key
            out.extend(taken)
            if len(out) >= count:
                break
        return out

    async def read_group(
        self,
        tenant: str,
        topics: Sequence[str],
        group: str,
        consumer: str,
        *,
        count: int,
        block: float,
    ) -> list[Entry]:
        state = self._tenant(tenant)
        # Consumers woken by the same append take turns in small slices, so a group's
        # work is shared rather than swallowed by whichever consumer runs first.
        count = min(count, _GROUP_SLICE)
        await asyncio.sleep(0)
        deadline = self._clock.monotonic() + block
        while True:
            taken = self._take_new(state, topics, group, consumer, count)
            if taken or self._closed:
                return taken
            # Lost the race for this append: wait again at once, which puts this
            # consumer ahead of the one just served (it re-waits only after a yield).
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return []
            try:
                await self._clock.wait_for(state.changed.wait(), remaining)
            except TimeoutError:
                return []

    async def claim_expired(
        self,
        tenant: str,
        topic: str,
        group: str,
        consumer: str,
        *,
        min_idle: float,
        max_deliveries: int,
        count: int,
        hard_cap: int | None = None,
    ) -> list[Entry]:
        state = self._tenant(tenant)
        g = state.topic(topic).groups.get(group)
        if g is None or not g.pending:
            return []
        now = self._clock.monotonic()
        due = [p for p in g.pending.values() if p.nacked or now - p.delivered_at >= min_idle][
            :count
        ]
        claimed: list[Entry] = []
        dead = False
        for p in due:
            reason = p.burial(max_deliveries, hard_cap)
            if reason is not None:
                del g.pending[p.entry.id]
                self._bury(state, topic, p.entry, reason, p.count, group)
                dead = True
                continue
            p.consumer, p.delivered_at, p.nacked = consumer, now, False
            p.count += 1
            claimed.append(p.entry)
        if dead:
            state.notify()
        return claimed

    async def claim_own(
        self,
        tenant: str,
        topic: str,
        group: str,
        consumer: str,
        *,
        after: str,
        max_deliveries: int,
        count: int,
        hard_cap: int | None = None,
    ) -> tuple[list[Entry], str | None]:
        state = self._tenant(tenant)
        g = state.topic(topic).groups.get(group)
        if g is None or count < 1:
            return [], None
        start = parse_id(after)
        own = sorted(
            (
                p
                for p in g.pending.values()
                if p.consumer == consumer and not p.nacked and p.entry.key > start
            ),
            key=lambda p: p.entry.key,
        )[:count]
        if not own:
            return [], None
        now = self._clock.monotonic()
        out: list[Entry] = []
        dead = False
        for p in own:
            reason = p.burial(max_deliveries, hard_cap)
            if reason is not None:
                del g.pending[p.entry.id]
                self._bury(state, topic, p.entry, reason, p.count, group)
                dead = True
                continue
            p.delivered_at = now
            p.count += 1
            out.append(p.entry)
        if dead:
            state.notify()
        return out, own[-1].entry.id

    async def still_pending(
        self, tenant: str, group: str, consumer: str, refs: Sequence[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        state = self._tenant(tenant)
        found: set[tuple[str, str]] = set()
        for topic, stream_id in refs:
            t = state.topics.get(topic)
            g = t.groups.get(group) if t else None
            p = g.pending.get(stream_id) if g else None
            if p is not None and p.consumer == consumer and not p.nacked:
                found.add((topic, stream_id))
        return found

    async def extend(
        self,
        tenant: str,
        group: str,
        refs: Sequence[tuple[str, str]],
        consumer: str | None = None,
        running: Sequence[tuple[str, str]] = (),
    ) -> tuple[int, list[tuple[str, str, str]]]:
        state = self._tenant(tenant)
        now = self._clock.monotonic()
        done = 0
        others: list[tuple[str, str, str]] = []
        started = set(running)
        for topic, stream_id in [*refs, *started.difference(refs)]:
            t = state.topics.get(topic)
            g = t.groups.get(group) if t else None
            p = g.pending.get(stream_id) if g else None
            if p is None or p.nacked:
                continue
            if consumer is not None and p.consumer != consumer:
                others.append((topic, stream_id, p.consumer))
                continue
            p.delivered_at = now
            if (topic, stream_id) in started:
                p.mark_started()
            done += 1
        return done, others

    def _bury(
        self, state: _Tenant, topic: str, entry: Entry, reason: str, count: int, group: str
    ) -> None:
        name = dead_letter_topic(topic)
        t = state.topic(name)
        dead = self._add(name, t, NewEvent(name, entry.type, entry.payload))
        t.dead[dead.id] = (reason, count, group, self._clock.now())

    async def ack(self, tenant: str, group: str, refs: Sequence[tuple[str, str]]) -> int:
        state = self._tenant(tenant)
        done = 0
        for topic, stream_id in refs:
            t = state.topics.get(topic)
            g = t.groups.get(group) if t else None
            if g is not None and g.pending.pop(stream_id, None) is not None:
                done += 1
        return done

    async def nack(
        self, tenant: str, group: str, refs: Sequence[tuple[str, str]], reason: str
    ) -> int:
        state = self._tenant(tenant)
        done = 0
        for topic, stream_id in refs:
            t = state.topics.get(topic)
            g = t.groups.get(group) if t else None
            p = g.pending.get(stream_id) if g else None
            if p is not None:
                p.nacked, p.reason = True, reason
                p.mark_started()
                done += 1
        return done

    async def dead_letters(self, tenant: str, topic: str, *, limit: int) -> list[DeadEntry]:
        t = self._tenant(tenant).topic(dead_letter_topic(topic))
        out: list[DeadEntry] = []
        for entry in t.entries:
            meta = t.dead.get(entry.id)
            if meta is not None:
                out.append(DeadEntry(entry, *meta))
                if len(out) >= limit:
                    break
        return out

    async def replay(self, tenant: str, topic: str, ids: Sequence[str]) -> list[Entry]:
        state = self._tenant(tenant)
        dlq = state.topic(dead_letter_topic(topic))
        found: list[Entry] = []
        missing: list[str] = []
        for stream_id in ids:
            index = dlq.after(parse_id(stream_id)) - 1
            if index >= 0 and dlq.entries[index].id == stream_id and stream_id in dlq.dead:
                found.append(dlq.entries[index])
            else:
                missing.append(stream_id)
        if missing:
            raise EventNotFound(
                f"no dead letters with ids {missing} in {dead_letter_topic(topic)!r}",
                details={"missing": missing},
            )
        live = state.topic(topic)
        replayed = [self._add(topic, live, NewEvent(topic, e.type, e.payload)) for e in found]
        gone = {e.id for e in found}
        dlq.entries = [e for e in dlq.entries if e.id not in gone]
        for stream_id in gone:
            dlq.dead.pop(stream_id, None)
        state.notify()
        return replayed

    async def stats(self, *, max_streams: int) -> LogStats:
        out = LogStats()
        for state in list(self._tenants.values()):
            for name, t in list(state.topics.items()):
                if out.streams >= max_streams:
                    out.complete = False
                    return out
                out.streams += 1
                if name.endswith(DLQ_SUFFIX):
                    live = name[: -len(DLQ_SUFFIX)]
                    out.dead_letters[live] = out.dead_letters.get(live, 0) + len(t.dead)
                    continue
                for group_name, g in t.groups.items():
                    lag = len(t.entries) - t.after(g.last)
                    out.add_group(group_name, lag, len(g.pending))
        return out

    async def group_status(
        self,
        tenant: str,
        *,
        group: str | None = None,
        topics: Sequence[str] | None = None,
        max_streams: int,
    ) -> tuple[list[GroupStatus], bool]:
        state = self._tenants.get(tenant)
        if state is None:
            return [], True
        names = [n for n in (topics if topics is not None else state.topics) if n in state.topics]
        names = [n for n in names if not n.endswith(DLQ_SUFFIX)]
        complete = len(names) <= max_streams
        found = []
        for name in names[:max_streams]:
            t = state.topics[name]
            for group_name, g in list(t.groups.items()):
                if group is not None and group_name != group:
                    continue
                lag = len(t.entries) - t.after(g.last)
                found.append(GroupStatus(name, group_name, lag, len(g.pending), format_id(g.last)))
        found.sort(key=lambda s: (s.group, s.topic))
        return found, complete

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        self._closed = True
        for state in self._tenants.values():
            state.notify()
