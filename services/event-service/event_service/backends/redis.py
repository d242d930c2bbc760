"""Redis Streams event log: survives restarts, shared by every service replica.

Key layout (the ``{tenant}`` hash tag keeps one tenant's keys on one Cluster shard, so
batch appends and dead-lettering can run in one MULTI):

- ``{prefix}:{<tenant>}:t:<topic>`` — the topic's stream (``T.dlq`` is a topic too);
  fields ``e`` (envelope JSON) and ``y`` (event type, for filtering without parsing),
  dead letters add ``r`` (reason), ``d`` (deliveries), ``g`` (group), ``t`` (dead at, ms).
- ``{prefix}:{<tenant>}:nr:<topic>:<group>`` — hash of notes per pending entry: field
  ``<id>`` its last nack reason, field ``<id>/s`` its started mark (see
  :mod:`event_service.backends.burial`); both go when the entry is acked or buried.
- ``{prefix}:{<tenant>}:cs:<group>|<consumer>`` — the id of the newest group stream of
  that consumer id, whichever process serves it (``|`` is not allowed in names).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis, RedisCluster
from redis.exceptions import ResponseError

from event_service.backends.base import (
    DeadEntry,
    Entry,
    EventLog,
    GroupStatus,
    LogStats,
    NewEvent,
)
from event_service.backends.burial import burial_reason, started_of
from event_service.backends.redis_appends import AppendCoalescer
from event_service.backends.redis_direct import DirectCommands, fields_of, xread_entries
from event_service.ids import ZERO_ID, parse_id
from event_service.settings import TAP_TENANT, Settings
from soorma_common.errors import EventNotFound
from soorma_common.events import DLQ_SUFFIX, dead_letter_topic

# Drop a consumer from a group on each stream where it owns no pending entry. Checked
# and deleted in one script: XGROUP DELCONSUMER would silently drop pending entries.
_FORGET_CONSUMER = """
local dropped = 0
for _, key in ipairs(KEYS) do
  local ok, pending = pcall(redis.call, 'XPENDING', key, ARGV[1], '-', '+', 1, ARGV[2])
  if ok and #pending == 0 then
    redis.call('XGROUP', 'DELCONSUMER', key, ARGV[1], ARGV[2])
    dropped = dropped + 1
  end
end
return dropped
"""
# Marks an entry started in its current delivery (``count``, from XPENDING) in the notes
# hash: "<count>:<started deliveries>", counting each delivery once (burial.next_mark).
_MARK = """
local function mark(notes, id, count)
  local field = id .. '/s'
  local old = redis.call('HGET', notes, field)
  local seen, started = '', 0
  if old then
    seen, started = string.match(old, '^(%d+):(%d+)$')
    started = tonumber(started)
  end
  if seen ~= tostring(count) then
    redis.call('HSET', notes, field, tostring(count) .. ':' .. tostring(started + 1))
  end
end
"""
# Renew the lease of pending deliveries: XCLAIM to their current owner with min-idle 0
# and JUSTID resets the idle time without counting a delivery. Owner lookup and claim
# run in one script, so a delivery another consumer took over meanwhile stays with it.
# KEYS: stream, notes hash. ARGV: group, the caller's consumer id ('' = anyone's), then
# id, running ('1': its handler started) pairs. Renews the deliveries the caller holds
# (idle back to 0, same owner) and marks the running ones started; returns {renewed,
# id, owner, id, owner...} with the ids another consumer holds (taken over after the
# caller's lease expired).
_EXTEND = (
    _MARK
    + """
local renewed = 0
local result = {0}
for i = 3, #ARGV, 2 do
  local ok, found = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if ok and #found == 1 and found[1][2] ~= '_nacked' then
    local owner = found[1][2]
    if ARGV[2] ~= '' and owner ~= ARGV[2] then
      table.insert(result, ARGV[i])
      table.insert(result, owner)
    else
      local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], owner, 0, ARGV[i], 'JUSTID')
      renewed = renewed + #claimed
      if ARGV[i + 1] == '1' and #claimed == 1 then
        mark(KEYS[2], ARGV[i], found[1][4])
      end
    end
  end
end
result[1] = renewed
return result
"""
)
# Nack: pending deliveries go to the nacked owner, idle long enough (10^12 ms) for the
# next claim pass whatever the visibility timeout (capped well below that). Each keeps
# its reason and is marked started (a handler nacked it). KEYS: stream, notes hash.
# ARGV: group, reason, ids. Returns how many were pending.
_NACK = (
    _MARK
    + """
local done = 0
for i = 3, #ARGV do
  local ok, found = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if ok and #found == 1 then
    redis.call('XCLAIM', KEYS[1], ARGV[1], '_nacked', 0, ARGV[i], 'IDLE', '1000000000000', 'JUSTID')
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[2])
    mark(KEYS[2], ARGV[i], found[1][4])
    done = done + 1
  end
end
return done
"""
)
# Release deliveries a superseded stream took to the newer stream of its consumer id:
# each one still pending on that consumer with the delivery count the old stream saw
# goes to the nacked owner, idle long enough for the next claim pass. One the newer
# stream already re-delivered (count went up), acked, or claimed elsewhere is left.
# ARGV: group, consumer, then id, count pairs. Returns the released ids.
_HAND_OVER = """
local released = {}
for i = 3, #ARGV, 2 do
  local ok, found = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if ok and #found == 1 and found[1][2] == ARGV[2] and tostring(found[1][4]) == ARGV[i + 1] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], '_nacked', 0, ARGV[i], 'IDLE', '1000000000000', 'JUSTID')
    table.insert(released, ARGV[i])
  end
end
return released
"""
# Forget a stream's session id only while it is still the newest of its consumer id.
_CLOSE_SESSION = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
# A consumer id's session record outlives a process killed without closing it, but
# not forever: a day (each new stream of that id writes it again).
_SESSION_TTL_SECONDS = 86_400
# Blocking reads: one per broadcast topic and one per group stream in this process.
_MAX_BLOCKING_CONNECTIONS = 10_000


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _entry(topic: str, raw_id: bytes, fields: dict[bytes, bytes], deliveries: int = 1) -> Entry:
    stream_id = raw_id.decode()
    return Entry(
        topic, stream_id, parse_id(stream_id), fields[b"y"].decode(), fields[b"e"], deliveries
    )


def open_redis(settings: Settings) -> tuple[Redis, Redis]:
    """The two clients a process needs: short commands, and blocking reads.

    Short commands share a bounded pool: a burst of requests (say 1,000 SSE clients
    connecting at once) waits for a connection instead of failing. Blocking reads
    (``XREAD``/``XREADGROUP BLOCK``) each hold a connection for up to ``block_seconds``
    and are bounded by that server-side, so they get their own pool and no socket
    timeout (which would also cost a timer per read).

    With ``redis_cluster`` both are :class:`RedisCluster` clients (connection limits
    per node); they serve the same commands, routed by key, hence the casts.
    """
    if settings.redis_cluster:
        commands_cluster = RedisCluster.from_url(
            settings.redis_url,
            max_connections=settings.redis_max_connections,
            socket_timeout=settings.redis_command_timeout,
            socket_connect_timeout=settings.redis_command_timeout,
        )
        blocking_cluster = RedisCluster.from_url(
            settings.redis_url,
            max_connections=_MAX_BLOCKING_CONNECTIONS,
            socket_timeout=None,
            socket_keepalive=True,
            socket_connect_timeout=settings.redis_command_timeout,
        )
        return cast(Redis, commands_cluster), cast(Redis, blocking_cluster)
    commands = Redis.from_pool(
        BlockingConnectionPool.from_url(
            settings.redis_url,
            max_connections=settings.redis_max_connections,
            timeout=settings.redis_command_timeout,
            socket_timeout=settings.redis_command_timeout,
            socket_connect_timeout=settings.redis_command_timeout,
        )
    )
    blocking = Redis.from_pool(
        ConnectionPool.from_url(
            settings.redis_url,
            max_connections=_MAX_BLOCKING_CONNECTIONS,
            socket_timeout=None,
            socket_keepalive=True,
            socket_connect_timeout=settings.redis_command_timeout,
        )
    )
    return commands, blocking


class RedisEventLog(EventLog):
    """Event log on Redis Streams; the clients (and their pools) are injected and shared.

    ``blocking_redis`` serves the blocking reads (defaults to ``redis``); see
    :func:`open_redis`. With ``direct`` (``SOORMA_REDIS_DIRECT``, not on a cluster) appends
    and live reads skip redis-py's client layer (:class:`DirectCommands`) and single-event
    appends are coalesced (:class:`AppendCoalescer`); without it they are redis-py commands.
    """

    # Every event-service replica on this Redis shares the group state.
    shared = True

    def __init__(
        self,
        *,
        redis: Redis,
        blocking_redis: Redis | None = None,
        prefix: str = "soorma",
        max_length: int = 100_000,
        command_timeout: float = 5.0,
        tap_topics: Iterable[str] = (),
        direct: bool = True,
    ):
        self._r = redis
        self._tap = frozenset(tap_topics)
        self._blocking = blocking_redis or redis
        self._prefix = prefix
        self._max_length = max_length
        self._forget = redis.register_script(_FORGET_CONSUMER)
        self._extend = redis.register_script(_EXTEND)
        self._nack = redis.register_script(_NACK)
        self._hand_over = redis.register_script(_HAND_OVER)
        self._close_session = redis.register_script(_CLOSE_SESSION)
        self._closed = False
        # On a Redis Cluster every command goes through the cluster client, which
        # routes it to the shard owning its keys' hash tag.
        self._cluster = isinstance(redis, RedisCluster)
        self._live: DirectCommands | None = None
        self._appends: AppendCoalescer | None = None
        if direct and not self._cluster:
            # The hot commands skip the client layer; both use the blocking pool's
            # timer-free connections (appends bound each round trip themselves).
            blocking_pool = self._blocking.connection_pool
            self._live = DirectCommands(pool=blocking_pool)
            self._appends = AppendCoalescer(
                commands=DirectCommands(pool=blocking_pool),
                max_length=max_length,
                timeout=command_timeout,
            )

    def _key(self, tenant: str, topic: str) -> str:
        return f"{self._prefix}:{{{tenant}}}:t:{topic}"

    def _notes(self, tenant: str, topic: str, group: str) -> str:
        """The hash of nack reasons and started marks of a group's pending entries."""
        return f"{self._prefix}:{{{tenant}}}:nr:{topic}:{group}"

    def _group_topics(self, tenant: str) -> str:
        """The set of the tenant's topics that have a consumer group (for group_status)."""
        return f"{self._prefix}:{{{tenant}}}:gt"

    def _session_key(self, tenant: str, group: str, consumer: str) -> str:
        return f"{self._prefix}:{{{tenant}}}:cs:{group}|{consumer}"

    async def open_session(self, tenant: str, group: str, consumer: str, session: str) -> None:
        await self._r.set(
            self._session_key(tenant, group, consumer), session, ex=_SESSION_TTL_SECONDS
        )

    async def newest_session(self, tenant: str, group: str, consumer: str) -> str | None:
        found = await self._r.get(self._session_key(tenant, group, consumer))
        return None if found is None else _text(found)

    async def close_session(self, tenant: str, group: str, consumer: str, session: str) -> None:
        if self._closed:
            return
        await self._close_session(keys=[self._session_key(tenant, group, consumer)], args=[session])

    async def hand_over(
        self, tenant: str, group: str, consumer: str, held: dict[tuple[str, str], int]
    ) -> int:
        by_topic: dict[str, list[str]] = {}
        for (topic, stream_id), count in held.items():
            by_topic.setdefault(topic, []).extend((stream_id, str(count)))
        released = 0
        for topic, args in by_topic.items():
            found = await self._hand_over(
                keys=[self._key(tenant, topic)], args=[group, consumer, *args]
            )
            released += len(found)
        return released

    async def append(self, tenant: str, events: Sequence[NewEvent]) -> list[str]:
        # Tap topics are also appended to the platform-wide copy (pseudo-tenant ``*``), in the
        # same MULTI as the tenant's own entry.
        tap = self._tap
        if self._appends is None:
            return await self._append_by_client(tenant, events)
        if len(events) == 1:
            e = events[0]
            tap_key = self._key(TAP_TENANT, e.topic) if e.topic in tap else None
            raw = await self._appends.xadd(
                self._key(tenant, e.topic), e.payload, e.type, tap_key=tap_key
            )
            return [raw.decode()]
        items = [(self._key(tenant, e.topic), e.payload, e.type) for e in events]
        items += [
            (self._key(TAP_TENANT, e.topic), e.payload, e.type) for e in events if e.topic in tap
        ]
        raws = await self._appends.xadd_atomic(items)
        return [raw.decode() for raw in raws[: len(events)]]

    async def _append_by_client(self, tenant: str, events: Sequence[NewEvent]) -> list[str]:
        """Appends through redis-py: the tenant's entries in one MULTI (on its shard).

        The tap copies live under the ``{*}`` hash tag, usually on another shard, so
        they follow in a second MULTI there (a crash between the two can lose a tap
        copy, never the tenant's own entry).
        """
        async with self._r.pipeline(transaction=True) as pipe:
            for e in events:
                pipe.xadd(
                    self._key(tenant, e.topic),
                    {b"e": e.payload, b"y": e.type},
                    maxlen=self._max_length,
                    approximate=True,
                )
            raws = await pipe.execute()
        tapped = [e for e in events if e.topic in self._tap]
        if tapped:
            async with self._r.pipeline(transaction=True) as pipe:
                for e in tapped:
                    pipe.xadd(
                        self._key(TAP_TENANT, e.topic),
                        {b"e": e.payload, b"y": e.type},
                        maxlen=self._max_length,
                        approximate=True,
                    )
                await pipe.execute()
        return [raw.decode() for raw in raws]

    async def last_ids(self, tenant: str, topics: Sequence[str]) -> dict[str, str]:
        async with self._r.pipeline(transaction=False) as pipe:
            for topic in topics:
                pipe.xrevrange(self._key(tenant, topic), count=1)
            found = await pipe.execute()
        return {
            topic: rows[0][0].decode() if rows else ZERO_ID
            for topic, rows in zip(topics, found, strict=True)
        }

    async def read_range(
        self, tenant: str, topic: str, *, after: str, upto: str, count: int
    ) -> list[Entry]:
        rows = await self._r.xrange(
            self._key(tenant, topic), min=f"({after}", max=upto, count=count
        )
        return [_entry(topic, raw_id, fields) for raw_id, fields in rows]

    async def read_live(
        self, tenant: str, topic: str, *, after: str, count: int, block: float
    ) -> list[Entry]:
        if self._live is None:
            found = await self._blocking.xread(
                {self._key(tenant, topic): after},
                count=count,
                block=max(1, int(block * 1000)),
            )
            return [
                _entry(topic, raw_id, fields)
                for _, rows in xread_entries(found)
                for raw_id, fields in rows
                if fields
            ]
        reply = await self._live.execute(
            "XREAD",
            "COUNT",
            count,
            "BLOCK",
            max(1, int(block * 1000)),
            "STREAMS",
            self._key(tenant, topic),
            after,
        )
        return [
            _entry(topic, raw_id, fields_of(flat))
            for _, rows in xread_entries(reply)
            for raw_id, flat in rows
        ]

    async def ensure_group(
        self, tenant: str, topics: Sequence[str], group: str, *, from_earliest: bool
    ) -> None:
        async with self._r.pipeline(transaction=False) as pipe:
            for topic in topics:
                pipe.xgroup_create(
                    self._key(tenant, topic),
                    group,
                    id="0" if from_earliest else "$",
                    mkstream=True,
                )
            pipe.sadd(self._group_topics(tenant), *topics)
            results = await pipe.execute(raise_on_error=False)
        for result in results:
            if isinstance(result, Exception) and "BUSYGROUP" not in str(result):
                raise result

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
        by_key = {self._key(tenant, topic): topic for topic in topics}
        try:
            found = await self._blocking.xreadgroup(
                group,
                consumer,
                dict.fromkeys(by_key, ">"),
                count=count,
                block=max(1, int(block * 1000)),
            )
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # The stream was deleted under us (e.g. flushed): recreate at "now".
            await self.ensure_group(tenant, topics, group, from_earliest=False)
            return []
        return [
            _entry(by_key[key.decode()], raw_id, fields)
            for key, rows in found
            for raw_id, fields in rows
            if fields
        ]

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
        key = self._key(tenant, topic)
        idle_ms = max(1, int(min_idle * 1000))
        try:
            pending = await self._r.xpending_range(
                key, group, min="-", max="+", count=count, idle=idle_ms
            )
        except ResponseError as exc:
            if "NOGROUP" in str(exc):
                return []
            raise
        if not pending:
            return []
        delivered = {p["message_id"]: p["times_delivered"] for p in pending}
        # XCLAIM re-checks the idle time atomically, so of several replicas claiming
        # the same delivery exactly one wins; that one also owns dead-lettering it.
        claimed = await self._r.xclaim(key, group, consumer, idle_ms, list(delivered))
        return await self._sort_out(
            tenant, topic, group, claimed, delivered, max_deliveries, hard_cap
        )

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
        if count < 1:
            return [], None
        key = self._key(tenant, topic)
        try:
            pending = await self._r.xpending_range(
                key,
                group,
                min="-" if after == ZERO_ID else f"({after}",
                max="+",
                count=count,
                consumername=consumer,
            )
            if not pending:
                return [], None
            # Reading the consumer's own history (an id instead of ">") hands back its
            # pending entries only, counting a delivery and renewing each lease; a
            # delivery another consumer took over meanwhile is no longer among them.
            found = await self._r.xreadgroup(group, consumer, {key: after}, count=len(pending))
        except ResponseError as exc:
            if "NOGROUP" in str(exc):
                return [], None
            raise
        delivered = {p["message_id"]: p["times_delivered"] for p in pending}
        rows = [row for _, rows in found for row in rows]
        out = await self._sort_out(tenant, topic, group, rows, delivered, max_deliveries, hard_cap)
        return out, pending[-1]["message_id"].decode()

    async def _sort_out(
        self,
        tenant: str,
        topic: str,
        group: str,
        rows: Sequence[tuple[bytes, dict[bytes, bytes]]],
        delivered: dict[bytes, int],
        max_deliveries: int,
        hard_cap: int | None,
    ) -> list[Entry]:
        """The entries a claim takes that are to be delivered again; those out of
        deliveries are buried, those trimmed away while pending acked.

        Only entries delivered ``max_deliveries`` times or more can be out of
        deliveries, so their notes are read (one HMGET) only when there are any.
        """
        out: list[Entry] = []
        due: list[tuple[bytes, dict[bytes, bytes], int]] = []
        gone: list[bytes] = []
        for raw_id, fields in rows:
            count = delivered.get(raw_id, 0)
            if not fields:
                gone.append(raw_id)  # trimmed away while pending: nothing to deliver
            elif count >= max_deliveries:
                due.append((raw_id, fields, count))
            else:
                out.append(_entry(topic, raw_id, fields, count + 1))
        if gone:
            await self._r.xack(self._key(tenant, topic), group, *gone)
        if not due:
            return out
        fields_wanted = [f for raw_id, _, _ in due for f in (raw_id, raw_id + b"/s")]
        notes = await self._r.hmget(self._notes(tenant, topic, group), fields_wanted)
        dead: list[tuple[bytes, dict[bytes, bytes], int, str]] = []
        for i, (raw_id, fields, count) in enumerate(due):
            nack_reason, mark = notes[2 * i], notes[2 * i + 1]
            reason = burial_reason(
                deliveries=count,
                started=started_of(mark),
                max_deliveries=max_deliveries,
                hard_cap=hard_cap,
                nack_reason=_text(nack_reason) if nack_reason else None,
            )
            if reason is None:
                out.append(_entry(topic, raw_id, fields, count + 1))
            else:
                dead.append((raw_id, fields, count, reason))
        if dead:
            await self._bury(tenant, topic, group, dead)
        out.sort(key=lambda e: e.key)
        return out

    async def still_pending(
        self, tenant: str, group: str, consumer: str, refs: Sequence[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        if not refs:
            return set()
        async with self._r.pipeline(transaction=False) as pipe:
            for topic, stream_id in refs:
                pipe.xpending_range(
                    self._key(tenant, topic),
                    group,
                    min=stream_id,
                    max=stream_id,
                    count=1,
                    consumername=consumer,
                )
            results = await pipe.execute(raise_on_error=False)
        return {
            ref
            for ref, found in zip(refs, results, strict=True)
            if isinstance(found, list) and found
        }

    async def extend(
        self,
        tenant: str,
        group: str,
        refs: Sequence[tuple[str, str]],
        consumer: str | None = None,
        running: Sequence[tuple[str, str]] = (),
    ) -> tuple[int, list[tuple[str, str, str]]]:
        renewed = 0
        others: list[tuple[str, str, str]] = []
        started = set(running)
        listed = [*refs, *started.difference(refs)]
        for topic, ids in self._by_topic(listed).items():
            flagged = [a for i in ids for a in (i, "1" if (topic, i) in started else "0")]
            found = await self._extend(
                keys=[self._key(tenant, topic), self._notes(tenant, topic, group)],
                args=[group, consumer or "", *flagged],
            )
            renewed += int(found[0])
            pairs = [_text(item) for item in found[1:]]
            others.extend((topic, pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2))
        return renewed, others

    async def _bury(
        self,
        tenant: str,
        topic: str,
        group: str,
        dead: list[tuple[bytes, dict[bytes, bytes], int, str]],
    ) -> None:
        """Move ``(id, fields, deliveries, reason)`` entries to the dead-letter topic."""
        notes_key = self._notes(tenant, topic, group)
        ids = [raw_id for raw_id, _, _, _ in dead]
        now_ms = str(time.time_ns() // 1_000_000)
        key = self._key(tenant, topic)
        dlq = self._key(tenant, dead_letter_topic(topic))
        async with self._r.pipeline(transaction=True) as pipe:
            for _, fields, count, reason in dead:
                pipe.xadd(
                    dlq,
                    {
                        b"e": fields[b"e"],
                        b"y": fields[b"y"],
                        b"r": reason,
                        b"d": str(count),
                        b"g": group,
                        b"t": now_ms,
                    },
                    maxlen=self._max_length,
                    approximate=True,
                )
            pipe.xack(key, group, *ids)
            pipe.hdel(notes_key, *_note_fields(ids))
            await pipe.execute()

    @staticmethod
    def _by_topic(refs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for topic, stream_id in refs:
            grouped.setdefault(topic, []).append(stream_id)
        return grouped

    async def ack(self, tenant: str, group: str, refs: Sequence[tuple[str, str]]) -> int:
        grouped = self._by_topic(refs)
        async with self._r.pipeline(transaction=False) as pipe:
            for topic, ids in grouped.items():
                pipe.xack(self._key(tenant, topic), group, *ids)
                pipe.hdel(self._notes(tenant, topic, group), *_note_fields(ids))
            results = await pipe.execute()
        # XACK on a missing stream or group answers 0: nothing was pending there.
        return sum(int(r) for r in results[::2])

    async def nack(
        self, tenant: str, group: str, refs: Sequence[tuple[str, str]], reason: str
    ) -> int:
        done = 0
        for topic, ids in self._by_topic(refs).items():
            done += int(
                await self._nack(
                    keys=[self._key(tenant, topic), self._notes(tenant, topic, group)],
                    args=[group, reason, *ids],
                )
            )
        return done

    async def dead_letters(self, tenant: str, topic: str, *, limit: int) -> list[DeadEntry]:
        name = dead_letter_topic(topic)
        rows = await self._r.xrange(self._key(tenant, name), count=limit)
        return [self._dead(name, raw_id, fields) for raw_id, fields in rows if b"r" in fields]

    @staticmethod
    def _dead(name: str, raw_id: bytes, fields: dict[bytes, Any]) -> DeadEntry:
        group = fields.get(b"g")
        return DeadEntry(
            entry=_entry(name, raw_id, fields),
            reason=fields[b"r"].decode(),
            deliveries=int(fields.get(b"d", b"0")),
            group=group.decode() if group else None,
            dead_at=datetime.fromtimestamp(int(fields.get(b"t", b"0")) / 1000, UTC),
        )

    async def replay(self, tenant: str, topic: str, ids: Sequence[str]) -> list[Entry]:
        dlq = self._key(tenant, dead_letter_topic(topic))
        async with self._r.pipeline(transaction=False) as pipe:
            for stream_id in ids:
                pipe.xrange(dlq, min=stream_id, max=stream_id, count=1)
            found = await pipe.execute()
        missing = [
            i for i, rows in zip(ids, found, strict=True) if not rows or b"r" not in rows[0][1]
        ]
        if missing:
            raise EventNotFound(
                f"no dead letters with ids {missing} in {dead_letter_topic(topic)!r}",
                details={"missing": missing},
            )
        key = self._key(tenant, topic)
        fields = [rows[0][1] for rows in found]
        async with self._r.pipeline(transaction=True) as pipe:
            for f in fields:
                pipe.xadd(
                    key, {b"e": f[b"e"], b"y": f[b"y"]}, maxlen=self._max_length, approximate=True
                )
            pipe.xdel(dlq, *ids)
            results = await pipe.execute()
        return [_entry(topic, raw_id, f) for raw_id, f in zip(results[:-1], fields, strict=True)]

    async def forget_consumer(
        self, tenant: str, topics: Sequence[str], group: str, consumer: str
    ) -> None:
        if self._closed:
            return  # a stream closing during shutdown: its consumer stays, harmlessly
        keys = [self._key(tenant, topic) for topic in topics]
        await self._forget(keys=keys, args=[group, consumer])

    async def stats(self, *, max_streams: int) -> LogStats:
        """SCAN for topic logs (at most ``max_streams``), then one pipeline of ``XLEN``
        (dead-letter topics) or ``XINFO GROUPS`` (live topics) per 100 of them."""
        out = LogStats()
        marker = ":t:"
        keys: list[str] = []
        pattern = f"{_glob_escape(self._prefix)}:*{marker}*"
        async for raw in self._r.scan_iter(match=pattern, count=500, _type="stream"):
            if len(keys) >= max_streams:
                out.complete = False
                break
            keys.append(raw.decode() if isinstance(raw, bytes) else raw)
        out.streams = len(keys)
        for start in range(0, len(keys), 100):
            chunk = keys[start : start + 100]
            async with self._r.pipeline(transaction=False) as pipe:
                for key in chunk:
                    if key.endswith(DLQ_SUFFIX):
                        pipe.xlen(key)
                    else:
                        pipe.xinfo_groups(key)
                results = await pipe.execute(raise_on_error=False)
            for key, result in zip(chunk, results, strict=True):
                if isinstance(result, Exception):
                    continue  # deleted between SCAN and now
                topic = key.rsplit(marker, 1)[1]
                if key.endswith(DLQ_SUFFIX):
                    live = topic[: -len(DLQ_SUFFIX)]
                    out.dead_letters[live] = out.dead_letters.get(live, 0) + int(result)
                    continue
                for info in result:
                    name = info["name"]
                    name = name.decode() if isinstance(name, bytes) else str(name)
                    lag = info.get("lag")
                    out.add_group(name, int(lag or 0), int(info.get("pending") or 0))
        return out

    async def group_status(
        self,
        tenant: str,
        *,
        group: str | None = None,
        topics: Sequence[str] | None = None,
        max_streams: int,
    ) -> tuple[list[GroupStatus], bool]:
        """``XINFO GROUPS`` of the tenant's topic logs: those named, else those in the
        tenant's set of grouped topics (kept by :meth:`ensure_group`, so no keyspace
        SCAN), pipelined 100 at a time."""
        if topics is None:
            members = await self._r.smembers(self._group_topics(tenant))
            topics = sorted(_text(m) for m in members)
        names = [t for t in topics if not t.endswith(DLQ_SUFFIX)]
        complete = len(names) <= max_streams
        names = names[:max_streams]
        found: list[GroupStatus] = []
        for start in range(0, len(names), 100):
            chunk = names[start : start + 100]
            async with self._r.pipeline(transaction=False) as pipe:
                for name in chunk:
                    pipe.xinfo_groups(self._key(tenant, name))
                results = await pipe.execute(raise_on_error=False)
            for name, result in zip(chunk, results, strict=True):
                if isinstance(result, Exception):
                    continue  # no such topic (never written, or deleted since the SCAN)
                for info in result:
                    group_name = _text(info["name"])
                    if group is not None and group_name != group:
                        continue
                    last = _text(info.get("last-delivered-id") or ZERO_ID)
                    lag = info.get("lag")
                    if lag is None:
                        # Redis cannot tell after deletions inside the stream: count.
                        lag = await self._count_after(self._key(tenant, name), last)
                    found.append(
                        GroupStatus(name, group_name, int(lag), int(info.get("pending") or 0), last)
                    )
        found.sort(key=lambda s: (s.group, s.topic))
        return found, complete

    async def _count_after(self, key: str, after: str) -> int:
        """How many entries of ``key`` come after stream id ``after`` (in pages)."""
        count, cursor = 0, f"({after}"
        while True:
            page = await self._r.xrange(key, min=cursor, max="+", count=1000)
            count += len(page)
            if len(page) < 1000:
                return count
            cursor = f"({_text(page[-1][0])}"

    async def ping(self) -> None:
        await self._r.ping()

    async def close(self) -> None:
        self._closed = True
        if self._appends is not None:
            await self._appends.close()
        if self._live is not None:
            await self._live.close()


def _note_fields(ids: Iterable[bytes | str]) -> list[bytes | str]:
    """The fields of the notes hash kept for entries ``ids``: reason and started mark."""
    out: list[bytes | str] = []
    for raw_id in ids:
        out.extend((raw_id, raw_id + (b"/s" if isinstance(raw_id, bytes) else "/s")))
    return out


def _glob_escape(text: str) -> str:
    """``text`` matched literally inside a Redis glob pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
