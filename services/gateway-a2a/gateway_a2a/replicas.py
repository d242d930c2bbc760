"""Replica heartbeats and the takeover of tasks whose replica stopped.

Every replica writes its heartbeat (``gateway_replicas``) every
``SOORMA_GATEWAY_HEARTBEAT_SECONDS`` and then looks for unfinished task routes of
replicas silent for ``SOORMA_GATEWAY_REPLICA_LEASE_SECONDS``. It takes each over (a
compare-and-swap on the route's replica, so one replica wins) and then:

- a task waiting for input stays so: the client's next message works through any
  replica, and the taker now applies the deadline's ``task.timeout``;
- a task whose answer this replica saw while the task was another's (the bridge keeps the
  last answer of such tasks) gets that answer now;
- any other task gets the answers that arrive from now on; if none settles it within
  ``SOORMA_GATEWAY_TAKEOVER_GRACE_SECONDS``, it fails ("the gateway replica running it
  stopped").

So a task whose replica never returns ends within lease + heartbeat + grace; a replica
that returns within the lease keeps its tasks (its durable group resumes them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway_a2a.bridge import Bridge
from gateway_a2a.executor import ORPHAN_EVENT
from gateway_a2a.models import replicas, routes
from gateway_a2a.settings import Settings
from gateway_a2a.store import Route, row_route
from soorma.event import Event
from soorma_common.events import SYSTEM_EVENTS

logger = logging.getLogger(__name__)

BATCH = 100

Resume = Callable[[Route, Event], Awaitable[None]]


class ReplicaWatch:
    """Heartbeat of this replica, takeover of the stopped ones' tasks (module docstring)."""

    def __init__(
        self, settings: Settings, engine: AsyncEngine, bridge: Bridge, resume: Resume
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.bridge = bridge
        self.resume = resume
        self.replica = settings.gateway_replica_id
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.beat()
        self._task = asyncio.create_task(self._run(), name="gateway replica watch")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.gateway_heartbeat_seconds)
            try:
                await self.beat()
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("gateway: heartbeat/takeover round failed: %s", exc)

    async def beat(self) -> None:
        now = datetime.now(UTC)
        async with self.engine.begin() as conn:
            done = await conn.execute(
                sa.update(replicas).where(replicas.c.replica_id == self.replica).values(seen_at=now)
            )
            if done.rowcount:
                return
        with contextlib.suppress(IntegrityError):  # another process of the same id won
            async with self.engine.begin() as conn:
                await conn.execute(sa.insert(replicas).values(replica_id=self.replica, seen_at=now))

    async def sweep(self) -> None:
        """Take over the tasks of stopped replicas; fail those overdue."""
        now = datetime.now(UTC)
        cutoff = now - timedelta(seconds=self.settings.gateway_replica_lease_seconds)
        live = sa.select(replicas.c.replica_id).where(replicas.c.seen_at >= cutoff)
        async with self.engine.connect() as conn:
            orphans = [
                row_route(row)
                for row in (
                    await conn.execute(
                        sa.select(routes)
                        .where(
                            sa.not_(routes.c.finished),
                            routes.c.replica != self.replica,
                            routes.c.replica.not_in(live),
                            routes.c.updated_at < cutoff,
                        )
                        .limit(BATCH)
                    )
                ).mappings()
            ]
        for route in orphans:
            await self.take_over(route, now)
        overdue = now - timedelta(seconds=self.settings.gateway_takeover_grace_seconds)
        async with self.engine.connect() as conn:
            late = [
                row_route(row)
                for row in (
                    await conn.execute(
                        sa.select(routes)
                        .where(
                            sa.not_(routes.c.finished),
                            routes.c.replica == self.replica,
                            routes.c.awaiting_event.is_(None),
                            routes.c.taken_over_at.is_not(None),
                            routes.c.taken_over_at < overdue,
                        )
                        .limit(BATCH)
                    )
                ).mappings()
            ]
        for route in late:
            if self.bridge.waiting(route.task_id):
                continue  # an executor here runs it again (a client answered it)
            await self._resume(route, orphan_event(route))

    async def take_over(self, route: Route, now: datetime) -> bool:
        """Point ``route`` at this replica (one replica wins); apply a known answer."""
        async with self.engine.begin() as conn:
            done = await conn.execute(
                sa.update(routes)
                .where(
                    routes.c.task_id == route.task_id,
                    routes.c.replica == route.replica,
                    sa.not_(routes.c.finished),
                )
                .values(replica=self.replica, taken_over_at=now, updated_at=now)
            )
        if not done.rowcount:
            return False
        logger.info(
            "gateway: took task %s over from stopped replica %s", route.task_id, route.replica
        )
        route.replica, route.taken_over_at = self.replica, now
        answer = self.bridge.seen_answer(route.task_id)
        if answer is not None and answer.tenant_id == route.tenant_id:
            await self._resume(route, answer)
        return True

    async def _resume(self, route: Route, event: Event) -> None:
        try:
            await self.resume(route, event)
        except Exception as exc:
            logger.warning("gateway: could not settle taken-over task %s: %s", route.task_id, exc)


def orphan_event(route: Route) -> Event:
    return Event(
        type=ORPHAN_EVENT,
        topic=SYSTEM_EVENTS,
        source="gateway-a2a",
        correlation_id=route.task_id,
        tenant_id=route.tenant_id,
        data={
            "reason": "the gateway replica running this task stopped and no answer "
            "reached the replica that took it over"
        },
    )
