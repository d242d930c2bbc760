"""The gateway's side of the event bus: publish as the caller's tenant, route answers.

The gateway is a platform service (contract C1): it publishes each request as the
caller's tenant, and reads the answers of every tenant from the platform tap
(``tenant=*``) through a durable consumer group of its own replica
(``gateway-<replica id>``), so every replica sees every answer and a restarted replica
resumes what arrived while it was down. The events read are the configured response
event, ``task.progress``, ``notification.human_input`` and ``task.timeout``.

An event goes to the executor waiting for its task on this replica; an event for a task
no executor here waits for, whose route names this replica (it restarted since), is
applied to the stored task by the ``on_orphan`` callback; events for tasks another
replica waits for are acknowledged and left to that replica's own group.

Every path applies the same rule first (``accepts``): the tap carries every tenant's
events, and any tenant can publish an event that names another tenant's task id, so an
event changes a task only when the event service stamped it with the task's tenant. An
event from another tenant is dropped and counted (``refused``), never queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from gateway_a2a.settings import Settings
from gateway_a2a.store import Route, RouteStore
from soorma.bus import BusClient
from soorma.client import Identity
from soorma.event import Event
from soorma_common.events import ACTION_RESULTS, NOTIFICATION_EVENTS, SYSTEM_EVENTS
from soorma_common.events import HUMAN_INPUT as HUMAN_INPUT_EVENT
from soorma_common.events import TASK_PROGRESS as PROGRESS_EVENT
from soorma_common.events import TASK_TIMEOUT as TIMEOUT_EVENT

logger = logging.getLogger(__name__)

READY_TIMEOUT_SECONDS = 15.0
TAP = "*"
MAX_ACKS = 500
# Acks wait this long to leave together (a redelivered answer is routed idempotently).
ACK_DELAY_SECONDS = 0.05
NOT_OURS_CAPACITY = 10_000
SERVICE_ROLE = "service"

Orphan = Callable[[Route, Event], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Waiter:
    """An executor on this replica waiting for one task's events, as its tenant."""

    tenant_id: str
    queue: asyncio.Queue[Event]


def service_identity(settings: Settings, tenant: str | None = None) -> Identity:
    """The gateway as a platform service (``X-Soorma-Role: service`` / its service JWT)."""
    return Identity(tenant_id=tenant, role=SERVICE_ROLE, token=settings.api_token)


class Bridge:
    """Bus clients per tenant, the answer streams, and the executors' waiting queues."""

    def __init__(self, settings: Settings, routes: RouteStore, http: httpx.AsyncClient) -> None:
        self.settings = settings
        self.routes = routes
        self.http = http
        self.replica = settings.gateway_replica_id
        self.group = f"gateway-{self.replica}"
        self.event_types = [
            settings.gateway_response_event,
            PROGRESS_EVENT,
            HUMAN_INPUT_EVENT,
            TIMEOUT_EVENT,
        ]
        self.waiters: dict[str, Waiter] = {}
        # Events dropped because their tenant is not their task's (forged or misrouted).
        self.refused = 0
        self.on_orphan: Orphan | None = None
        self._bus: BusClient | None = None
        self._stream: asyncio.Task[None] | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._acks: list[str] = []
        self._ack_wake = asyncio.Event()
        self._closing = False
        self._not_ours: OrderedDict[str, None] = OrderedDict()
        # The last settling answer of each task another replica runs.
        self._seen: OrderedDict[str, Event] = OrderedDict()

    @property
    def bus(self) -> BusClient:
        """The gateway's bus client: a platform service (it names the tenant per call)."""
        if self._bus is None:
            self._bus = BusClient(
                base_url=self.settings.event_service_url,
                http=self.http,
                identity=service_identity(self.settings),
                source="gateway-a2a",
            )
        return self._bus

    async def start(self) -> None:
        """Start reading the answers (from the platform tap)."""
        if self._stream is None or self._stream.done():
            self._stream = asyncio.create_task(self._consume(), name="gateway answers")
            self._flusher = asyncio.create_task(self._flush_acks(), name="gateway acks")

    async def ensure(self, tenant: str, wait_seconds: float = READY_TIMEOUT_SECONDS) -> None:
        """Make sure answers are being read before publishing a request for ``tenant``.

        Raises:
            TimeoutError: the answer stream is not open after ``wait_seconds``.
        """
        del tenant  # one stream (the tap) carries every tenant's answers
        if self._ready.is_set() and self._stream is not None and not self._stream.done():
            # The common case, at no cost: ``wait_for`` would wrap the wait in a new
            # task, one more turn of the event loop on every request (twice per task).
            return
        await self.start()
        await asyncio.wait_for(self._ready.wait(), wait_seconds)

    async def _consume(self) -> None:
        while not self._closing:
            try:
                async with self.bus.subscribe(
                    [ACTION_RESULTS, SYSTEM_EVENTS, NOTIFICATION_EVENTS],
                    event_types=self.event_types,
                    group=self.group,
                    consumer=self.replica,
                    tenant_id=TAP,
                ) as sub:
                    await sub.wait_ready(READY_TIMEOUT_SECONDS)
                    self._ready.set()
                    async for event in sub:
                        try:
                            await self.route(event)
                        except Exception:
                            logger.exception("gateway: could not route %s %s", event.type, event.id)
                        if event.delivery_id:
                            self._acks.append(event.delivery_id)
                            self._ack_wake.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("gateway: answer stream failed (%s); reconnecting", exc)
                await asyncio.sleep(1.0)

    async def _flush_acks(self) -> None:
        """Ack what was routed, in one request per turn (those arriving meanwhile wait)."""
        while True:
            await self._ack_wake.wait()
            await asyncio.sleep(ACK_DELAY_SECONDS)
            self._ack_wake.clear()
            while self._acks:
                ids, self._acks = self._acks[:MAX_ACKS], self._acks[MAX_ACKS:]
                try:
                    await self.bus.ack(self.group, ids, tenant_id=TAP)
                except Exception as exc:  # redelivered later; routing is idempotent
                    logger.warning("gateway: ack of %d deliveries failed: %s", len(ids), exc)

    @staticmethod
    def task_of(event: Event) -> str | None:
        """The gateway task an answer belongs to."""
        if event.type in (HUMAN_INPUT_EVENT, TIMEOUT_EVENT):
            value = event.data.get("task_id")
            return str(value) if value else event.correlation_id
        return event.correlation_id

    def accepts(self, event: Event, tenant_id: str) -> bool:
        """``event`` may change a task of ``tenant_id``: the event service stamped it so.

        The tap's events always carry the publisher's tenant; one without a tenant, or
        with another tenant's, is refused whatever task id it names.
        """
        if event.tenant_id == tenant_id:
            return True
        self.refused += 1
        logger.warning(
            "gateway: refused %s %s from tenant %r for a task of another tenant",
            event.type,
            event.id,
            event.tenant_id,
        )
        return False

    async def route(self, event: Event) -> None:
        """Hand the event to its waiting executor, or to ``on_orphan`` if it is ours."""
        task_id = self.task_of(event)
        if not task_id:
            return
        waiter = self.waiters.get(task_id)
        if waiter is not None:
            if self.accepts(event, waiter.tenant_id):
                waiter.queue.put_nowait(event)
            return
        if task_id in self._not_ours:
            return
        route = await self.routes.get(task_id)
        if route is None and event.type == TIMEOUT_EVENT and event.correlation_id:
            route = await self.routes.by_awaiting(event.correlation_id)
        if route is None:
            # Not a gateway task (the tap carries every agent's progress): a gateway
            # task's route is stored before its request is published, so an id without
            # one never becomes a gateway task; remember it and skip the lookup.
            self._not_ours[task_id] = None
            if len(self._not_ours) > NOT_OURS_CAPACITY:
                self._not_ours.popitem(last=False)
            return
        if route.finished or not self.accepts(event, route.tenant_id):
            return
        if route.replica != self.replica:
            if event.type != PROGRESS_EVENT:
                # Kept in case this replica takes the task over (replicas.py).
                self._seen[task_id] = event
                if len(self._seen) > NOT_OURS_CAPACITY:
                    self._seen.popitem(last=False)
            return
        if self.on_orphan is not None:
            await self.on_orphan(route, event)

    def wait_for(self, task_id: str, tenant_id: str) -> asyncio.Queue[Event]:
        """Register this replica as the one waiting for ``task_id``'s events.

        Only events the event service stamped with ``tenant_id`` reach the queue.
        """
        queue: asyncio.Queue[Event] = asyncio.Queue()
        self.waiters[task_id] = Waiter(tenant_id, queue)
        return queue

    def waiting(self, task_id: str) -> bool:
        """An executor on this replica waits for ``task_id``'s events."""
        return task_id in self.waiters

    def seen_answer(self, task_id: str) -> Event | None:
        """The last answer seen for ``task_id`` while another replica ran it."""
        return self._seen.pop(task_id, None)

    def stop_waiting(self, task_id: str) -> None:
        self.waiters.pop(task_id, None)

    async def publish(
        self,
        tenant: str,
        topic: str,
        event_type: str,
        data: Mapping[str, Any],
        *,
        user_id: str | None = None,
        **fields: Any,
    ) -> str:
        """Publish as ``tenant`` (and its user)."""
        return await self.bus.publish(
            topic, event_type, dict(data), tenant_id=tenant, user_id=user_id, **fields
        )

    async def close(self) -> None:
        self._closing = True
        tasks = [t for t in (self._stream, self._flusher) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._acks:
            with contextlib.suppress(Exception):
                await self.bus.ack(self.group, self._acks[:MAX_ACKS], tenant_id=TAP)
