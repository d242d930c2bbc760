"""``GET /v1/tracker/plans/{id}/stream``: a plan's live updates as server-sent events.

The stream polls the tracker's tables (every ``SOORMA_TRACKER_STREAM_POLL_SECONDS``), so it
sees what any replica projected. Frames: ``plan`` (the summary, first and on every change),
``entry`` (each new timeline entry, ``id:`` = its seq), ``end`` (terminal status reached and
settled, then the stream closes) and ``heartbeat``.

The tracker reads every topic through one tap subscription, with no order across topics: an
event published before a plan's terminal event (a tool's result on ``action-results``, say)
can be projected just after it. So a stream that sees the plan end keeps looking until
nothing new has come for ``SOORMA_TRACKER_STREAM_SETTLE_SECONDS``, or the terminal event is
that old already (a plan that ended earlier: ``end`` at once), before it sends ``end``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

import orjson

from soorma_common.tracker import TERMINAL_PLAN_STATUSES
from tracker_service import queries
from tracker_service.state import TrackerState


def _frame(event: str, data: bytes, event_id: int | None = None) -> bytes:
    head = b"event: " + event.encode() + b"\n"
    if event_id is not None:
        head += b"id: " + str(event_id).encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


async def plan_stream(
    tracker: TrackerState,
    tenant: str,
    plan_id: str,
    *,
    after_seq: int,
    heartbeat: float,
    disconnected: Callable[[], Awaitable[bool]],
) -> AsyncIterator[bytes]:
    last_seq = after_seq
    last_plan: bytes | None = None
    quiet = 0.0
    poll = tracker.settings.tracker_stream_poll_seconds
    settle = tracker.settings.tracker_stream_settle_seconds
    clock = asyncio.get_running_loop().time
    last_news = clock()
    while True:
        async with tracker.engine.connect() as conn:
            row = await queries.get_plan_row(conn, tenant, plan_id)
            entries, more = await queries.timeline(
                conn, tenant, plan_id, limit=500, after_seq=last_seq
            )
        summary = queries.plan_summary(row)
        plan = orjson.dumps(summary.model_dump(mode="json"))
        chunks = []
        if plan != last_plan:
            chunks.append(_frame("plan", plan))
            last_plan = plan
        for entry in entries:
            chunks.append(_frame("entry", orjson.dumps(entry.model_dump(mode="json")), entry.seq))
            last_seq = entry.seq
        if chunks:
            quiet = 0.0
            last_news = clock()
            yield b"".join(chunks)
        if more:
            continue
        if summary.status.value in TERMINAL_PLAN_STATUSES and (
            clock() - last_news >= settle
            or (datetime.now(UTC) - summary.updated_at).total_seconds() >= settle
        ):
            yield _frame("end", plan)
            return
        await asyncio.sleep(poll)
        quiet += poll
        if quiet >= heartbeat:
            quiet = 0.0
            yield _frame("heartbeat", b"{}")
        if await disconnected():
            return
