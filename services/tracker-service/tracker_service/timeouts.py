"""Durable timeouts (``task.timeout``, ``plan.wait_timeout``): deadlines live in
``tracker_waits``; every replica looks for due ones and fires each exactly once.

A replica *claims* a due wait with a conditional ``UPDATE`` (status still ``waiting``, no
live lease) under the tracker's write lock, publishes the timeout event with an id derived
from the wait (so a re-fire after a crash is the same event), then marks the wait
``timed_out``. A replica that dies between claim and mark leaves a lease that runs out
after ``lease`` seconds; another replica (or the restarted one) then fires it. Overdue waits
are fired at start, since the loop runs at once.

Every function takes the ``clock`` that says what time it is and times the passes, so a
test moves time past a deadline instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from soorma.bus import BusClient
from soorma_common.clock import SYSTEM_CLOCK, Clock
from soorma_common.events import PLAN_WAIT_TIMEOUT, SYSTEM_EVENTS, TASK_TIMEOUT
from tracker_service.db import lock_writes
from tracker_service.models import waits
from tracker_service.projection import bump, timeout_event_id
from tracker_service.timeutil import utc, utc_or_none

log = logging.getLogger("tracker_service.timeouts")

SOURCE = "soorma-tracker"
CLAIM_LIMIT = 100


def timeout_event(row: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The timeout event of a wait row: ``(type, data, envelope fields)``."""
    m = row._mapping
    deadline = utc_or_none(m["deadline"])
    if m["kind"] == "human_input":
        data = {
            "task_id": m["task_id"],
            "sub_task_id": m["sub_task_id"],
            "reason": "hitl_timeout",
            "deadline": deadline.isoformat() if deadline else None,
            "timeout_seconds": m["timeout_seconds"],
        }
        return TASK_TIMEOUT, data, {"correlation_id": m["sub_task_id"]}
    data = {
        "plan_id": m["plan_id"],
        "expected_event": m["expected_event"],
        "timeout_seconds": m["timeout_seconds"],
        "reason": "wait_timeout",
        "wait_id": m["wait_id"],
    }
    return PLAN_WAIT_TIMEOUT, data, {"correlation_id": m["plan_id"]}


async def claim_due(
    engine: AsyncEngine, owner: str, lease: float, *, clock: Clock = SYSTEM_CLOCK
) -> list[Any]:
    """Claim the due waits nobody holds a live lease on; the claimed rows."""
    at = clock.now()
    due = sa.and_(
        waits.c.status == "waiting",
        waits.c.deadline <= at,
        sa.or_(waits.c.lease_until.is_(None), waits.c.lease_until < at),
    )
    async with engine.begin() as conn:
        await lock_writes(conn)
        rows = (
            await conn.execute(
                sa.select(waits).where(due).order_by(waits.c.deadline).limit(CLAIM_LIMIT)
            )
        ).all()
        claimed = []
        for row in rows:
            m = row._mapping
            done = await conn.execute(
                waits.update()
                .where(waits.c.tenant_id == m["tenant_id"], waits.c.wait_id == m["wait_id"], due)
                .values(lease_owner=owner, lease_until=at + timedelta(seconds=lease))
            )
            if done.rowcount == 1:
                claimed.append(row)
    return claimed


async def fire(
    engine: AsyncEngine, bus: BusClient, row: Any, owner: str, *, clock: Clock = SYSTEM_CLOCK
) -> str:
    """Publish the timeout of a claimed wait, then mark it timed out; the event id."""
    m = row._mapping
    event_type, data, fields = timeout_event(row)
    event_id = timeout_event_id(m["tenant_id"], m["wait_id"])
    await bus.publish(
        SYSTEM_EVENTS,
        event_type,
        data,
        tenant_id=m["tenant_id"],
        event_id=event_id,
        plan_id=m["plan_id"],
        session_id=m["session_id"],
        source=SOURCE,
        **fields,
    )
    async with engine.begin() as conn:
        await lock_writes(conn)
        done = await conn.execute(
            waits.update()
            .where(
                waits.c.tenant_id == m["tenant_id"],
                waits.c.wait_id == m["wait_id"],
                waits.c.status == "waiting",
                waits.c.lease_owner == owner,
            )
            .values(status="timed_out", timed_out_at=clock.now(), timeout_event_id=event_id)
        )
        if done.rowcount:  # else the event was projected first, and counted there
            await bump(conn, timeouts_fired=1)
    log.info(
        "fired %s for %s/%s (deadline %s)",
        event_type,
        m["tenant_id"],
        m["wait_id"],
        utc(m["deadline"]).isoformat(),
    )
    return event_id


async def fire_due(
    engine: AsyncEngine, bus: BusClient, owner: str, lease: float, *, clock: Clock = SYSTEM_CLOCK
) -> int:
    """One pass: claim and fire every due wait; how many were fired."""
    fired = 0
    for row in await claim_due(engine, owner, lease, clock=clock):
        try:
            await fire(engine, bus, row, owner, clock=clock)
            fired += 1
        except Exception as exc:  # the lease runs out and a later pass retries
            log.warning("could not fire timeout of %s: %s", row._mapping["wait_id"], exc)
    return fired


async def run_timeouts(
    engine: AsyncEngine,
    bus: BusClient,
    *,
    owner: str,
    lease: float,
    interval: float,
    clock: Clock = SYSTEM_CLOCK,
) -> None:
    """Fire due timeouts every ``interval`` seconds until cancelled (first pass at once)."""
    while True:
        try:
            await fire_due(engine, bus, owner, lease, clock=clock)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("timeout pass failed: %s", exc)
        await clock.sleep(interval)
