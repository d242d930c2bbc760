"""The two SSE stream kinds: broadcast (resumable) and consumer group (acked)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence

import orjson
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from event_service.backends.base import Entry, EventLog
from event_service.fanout import BroadcastHub, Subscriber
from event_service.groups import GroupSession
from event_service.ids import format_token, parse_id
from event_service.sse import HEARTBEAT_DATA, TypeFilter, frame


async def _wait(sub: Subscriber, heartbeat: float) -> bool:
    """Wait until ``sub`` has something; False when ``heartbeat`` seconds passed first."""
    sub.wake.clear()
    if sub.buffer or sub.overflowed:
        return True
    try:
        async with asyncio.timeout(heartbeat):
            await sub.wake.wait()
    except TimeoutError:
        return False
    return True


async def broadcast_stream(
    *,
    hub: BroadcastHub,
    log: EventLog,
    tenant: str,
    topics: Sequence[str],
    start: dict[str, str],
    live_from: dict[str, str],
    accept: TypeFilter,
    heartbeat: float,
    batch: int,
    buffer_limit: int,
) -> AsyncIterator[bytes]:
    """Frames for a broadcast stream starting after the positions in ``start``.

    ``live_from`` holds each topic's newest id when the request arrived: a topic with
    no shared reader yet gets one starting there, and this stream reads anything
    between ``start`` and the reader's position from the log itself.

    Every message frame's ``id`` is the resume token covering all topics. Entries the
    type filter rejects still advance the position.
    """
    ids = dict(start)
    keys = {topic: parse_id(stream_id) for topic, stream_id in start.items()}
    sub = Subscriber(limit=buffer_limit)

    def token() -> str:
        return format_token(ids, topics)

    def render(entries: Iterable[Entry]) -> bytes:
        parts = []
        for e in entries:
            if e.key <= keys[e.topic]:
                continue  # already sent (catch-up and live reading overlap)
            keys[e.topic] = e.key
            ids[e.topic] = e.id
            if accept(e.type):
                parts.append(frame(b"message", e.payload, token()))
        return b"".join(parts)

    def attach() -> dict[str, str]:
        return {
            topic: hub.attach(tenant, topic, sub, max(ids[topic], live_from[topic], key=parse_id))
            for topic in topics
        }

    try:
        upto = attach()
        ready = orjson.dumps({"topics": list(topics), "group": None, "position": token()})
        yield frame(b"ready", ready, token())
        while True:
            for topic in topics:
                # Catch up from the log to where the shared reader took over.
                while parse_id(upto[topic]) > keys[topic]:
                    entries = await log.read_range(
                        tenant, topic, after=ids[topic], upto=upto[topic], count=batch
                    )
                    if not entries:
                        break  # trimmed or deleted: nothing older left to send
                    chunk = render(entries)
                    if chunk:
                        yield chunk
            while not sub.overflowed:
                if not await _wait(sub, heartbeat):
                    yield frame(b"heartbeat", HEARTBEAT_DATA, token())
                    continue
                entries, sub.buffer = sub.buffer, deque()
                chunk = render(entries)
                if chunk:
                    yield chunk
            # Fell too far behind: re-attach and read the gap from the log.
            for topic in topics:
                hub.detach(tenant, topic, sub)
            sub.overflowed = False
            sub.buffer.clear()
            upto = attach()
    finally:
        for topic in topics:
            hub.detach(tenant, topic, sub)


class GroupStreamResponse(StreamingResponse):
    """The SSE response of a group stream; ends its session however the response ends.

    Both stream kinds are Starlette ``StreamingResponse``s of pre-encoded frames rather
    than sse-starlette's ``EventSourceResponse``: that one (a task group of four tasks, a
    lock and a cancel scope per chunk) measured +33 % server memory per connection and
    +18 % server CPU per delivery on B5 (``docs/benchmarks.md``).

    The generator's own ``finally`` is not enough: when the client disconnects while the
    response is sending a chunk, the generator is left suspended at its ``yield`` and is
    only closed once garbage-collected. Meanwhile the session would keep reading and
    claiming deliveries for a consumer that is gone, each lost until it expires again.
    """

    def __init__(
        self, body: AsyncIterator[bytes], *, session: GroupSession, headers: dict[str, str]
    ) -> None:
        super().__init__(body, media_type="text/event-stream", headers=headers)
        self.session = session

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.session.close()


async def group_stream(
    *, session: GroupSession, accept: TypeFilter, heartbeat: float
) -> AsyncIterator[bytes]:
    """Frames for a consumer-group stream; each message ``id`` is its ack token.

    Entries the type filter rejects are acked for the group at once: this consumer
    group has declared it does not handle them.
    """
    sub = session.sub
    try:
        session.start()
        ready = orjson.dumps(
            {
                "topics": session.topics,
                "group": session.group,
                "consumer": session.consumer,
                "prefetch": session.prefetch,
            }
        )
        yield frame(b"ready", ready)
        while True:
            if not await _wait(sub, heartbeat):
                yield frame(b"heartbeat", HEARTBEAT_DATA)
                continue
            if session.superseded:
                return  # a newer stream with this consumer id has its deliveries
            entries, sub.buffer = sub.buffer, deque()
            session.drained.set()
            skipped = [(e.topic, e.id) for e in entries if not accept(e.type)]
            if skipped:
                await session.log.ack(session.tenant, session.group, skipped)
                session.settle(skipped)
            chunk = b"".join(frame(b"message", e.payload, e.ref) for e in entries if accept(e.type))
            if chunk:
                yield chunk
    finally:
        session.close()
