"""The gateway's side of the event bus: publish as the caller's tenant, route answers.

Each replica reads the events that answer gateway tasks (the configured response event,
``task.progress``, ``notification.human_input``, ``task.timeout``) through a durable
consumer group of its own (``gateway-<replica id>``), so every replica sees every
answer and a restarted replica resumes what arrived while it was down. An event goes to
the executor waiting for its task on this replica; an event for a task no executor here
waits for, whose route names this replica (it restarted since), is applied to the stored
task by the ``on_orphan`` callback. Events for tasks another replica waits for are
acknowledged and left to that replica's own group.

Until the platform-wide ``tenant=*`` tap (contract C1) is available, one stream per
tenant with open tasks is opened, acting as that tenant.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from gateway_a2a.settings import Settings
from gateway_a2a.store import Route, RouteStore
from soorma._http import Identity
from soorma.bus import BusClient
from soorma.event import Event
from soorma_common.events import ACTION_RESULTS, NOTIFICATION_EVENTS, SYSTEM_EVENTS

logger = logging.getLogger(__name__)

PROGRESS_EVENT = "task.progress"
HUMAN_INPUT_EVENT = "notification.human_input"
TIMEOUT_EVENT = "task.timeout"
READY_TIMEOUT_SECONDS = 15.0

Orphan = Callable[[Route, Event], Awaitable[None]]


class Bridge:
    """Bus clients per tenant, the answer streams, and the executors' waiting queues."""

    def __init__(self, settings: Settings, routes: RouteStore, http: httpx.AsyncClient) -> None:
        self.settings = settings
        self.routes = routes
        self.http = http
        self.replica = settings.gateway_replica_id
        self.group = f"gateway-{self.replica}"
        self.event_types = [
            settings.gateway_response_event, PROGRESS_EVENT, HUMAN_INPUT_EVENT, TIMEOUT_EVENT,
        ]
        self.waiters: dict[str, asyncio.Queue[Event]] = {}
        self.on_orphan: Orphan | None = None
        self._buses: dict[str, BusClient] = {}
        self._streams: dict[str, asyncio.Task[None]] = {}
        self._ready: dict[str, asyncio.Event] = {}
        self._closing = False

    def bus(self, tenant: str) -> BusClient:
        """A bus client acting as ``tenant`` (the gateway validates payloads itself)."""
        bus = self._buses.get(tenant)
        if bus is None:
            bus = self._buses[tenant] = BusClient(
                base_url=self.settings.event_service_url, http=self.http,
                identity=Identity(tenant_id=tenant), source="gateway-a2a",
            )
        return bus

    async def start(self) -> None:
        """Open the streams of every tenant that still has unfinished tasks."""
        for tenant in await self.routes.open_tenants():
            self._open(tenant)

    async def ensure(self, tenant: str) -> None:
        """Make sure this tenant's answers are being read before publishing for it."""
        self._open(tenant)
        await asyncio.wait_for(self._ready[tenant].wait(), READY_TIMEOUT_SECONDS)

    def _open(self, tenant: str) -> None:
        task = self._streams.get(tenant)
        if task is not None and not task.done():
            return
        self._ready[tenant] = self._ready.get(tenant) or asyncio.Event()
        self._streams[tenant] = asyncio.create_task(
            self._consume(tenant), name=f"gateway answers {tenant}"
        )

    async def _consume(self, tenant: str) -> None:
        bus = self.bus(tenant)
        while not self._closing:
            try:
                async with bus.subscribe(
                    [ACTION_RESULTS, SYSTEM_EVENTS, NOTIFICATION_EVENTS],
                    event_types=self.event_types, group=self.group, consumer=self.replica,
                ) as sub:
                    await sub.wait_ready(READY_TIMEOUT_SECONDS)
                    self._ready[tenant].set()
                    async for event in sub:
                        try:
                            await self.route(event)
                        except Exception:
                            logger.exception("gateway: could not route %s %s", event.type, event.id)
                        if event.delivery_id:
                            await bus.ack(self.group, event.delivery_id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("gateway: answer stream for tenant %s failed: %s", tenant, exc)
                await asyncio.sleep(1.0)

    @staticmethod
    def task_of(event: Event) -> str | None:
        """The gateway task an answer belongs to."""
        if event.type in (HUMAN_INPUT_EVENT, TIMEOUT_EVENT):
            value = event.data.get("task_id")
            return str(value) if value else event.correlation_id
        return event.correlation_id

    async def route(self, event: Event) -> None:
        """Hand the event to its waiting executor, or to ``on_orphan`` if it is ours."""
        task_id = self.task_of(event)
        if not task_id:
            return
        waiter = self.waiters.get(task_id)
        if waiter is not None:
            waiter.put_nowait(event)
            return
        route = await self.routes.get(task_id)
        if route is None and event.type == TIMEOUT_EVENT and event.correlation_id:
            route = await self.routes.by_awaiting(event.correlation_id)
        if route is None or route.finished or route.replica != self.replica:
            return
        if event.tenant_id and event.tenant_id != route.tenant_id:
            return
        if self.on_orphan is not None:
            await self.on_orphan(route, event)

    def wait_for(self, task_id: str) -> asyncio.Queue[Event]:
        """Register this replica as the one waiting for ``task_id``'s events."""
        queue: asyncio.Queue[Event] = asyncio.Queue()
        self.waiters[task_id] = queue
        return queue

    def stop_waiting(self, task_id: str) -> None:
        self.waiters.pop(task_id, None)

    async def publish(
        self, tenant: str, topic: str, event_type: str, data: Mapping[str, Any],
        *, user_id: str | None = None, **fields: Any,
    ) -> str:
        """Publish as ``tenant`` (and its user)."""
        return await self.bus(tenant).publish(
            topic, event_type, dict(data), tenant_id=tenant, user_id=user_id, **fields
        )

    async def close(self) -> None:
        self._closing = True
        for task in self._streams.values():
            task.cancel()
        for task in self._streams.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._streams.clear()
