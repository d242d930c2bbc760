"""Consumption: reading an agent's stream and running each new event as its own task."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable

from soorma.agents._leases import LeaseRenewer
from soorma.agents._lru import RecentIds
from soorma.event import Event
from soorma.subscription import Subscription

logger = logging.getLogger("soorma.agent")


class Intake:
    """Turns deliveries into handler runs: at most ``prefetch`` held, ``max_concurrency`` run.

    A delivery of an event this replica completed (its ack was lost) is settled at
    once; one that is still running here is left to the running task.

    Args:
        name: Agent name (for task names and log lines).
        completed: Ids of events whose handlers succeeded (the duplicate guard).
        leases: Renewer whose ``held`` set tracks the unsettled deliveries.
        process: Runs an event's handlers and settles it.
        settle_done: Settles a redelivery of a completed event.
    """

    def __init__(
        self,
        *,
        name: str,
        completed: RecentIds,
        leases: LeaseRenewer,
        process: Callable[[Event], Awaitable[None]],
        settle_done: Callable[[Event], None],
    ) -> None:
        self.name = name
        self.completed = completed
        self.leases = leases
        self.in_flight: dict[str, asyncio.Task[None]] = {}
        self._process = process
        self._settle_done = settle_done
        self._window: asyncio.Semaphore | None = None
        self._slots: asyncio.Semaphore | None = None

    async def consume(self, subscription: Subscription, *, prefetch: int, concurrency: int) -> None:
        """Read ``subscription`` until it ends, starting one task per new event."""
        self._window = window = asyncio.Semaphore(prefetch)
        self._slots = asyncio.Semaphore(concurrency)
        async for event in subscription:
            if event.id in self.completed:
                logger.debug("agent %s: skipping completed event %s", self.name, event.id)
                self._settle_done(event)
                continue
            if event.id in self.in_flight:
                continue
            # The service holds us to ``prefetch`` unsettled deliveries; this only
            # matters against a service that does not.
            await window.acquire()
            # Leased from now on, also while waiting for a handler slot.
            if event.delivery_id is not None:
                self.leases.held.add(event.delivery_id)
            task = asyncio.create_task(self._run(event), name=f"{self.name} {event.type}")
            self.in_flight[event.id] = task
            task.add_done_callback(functools.partial(self._released, event.id, event.delivery_id))

    async def _run(self, event: Event) -> None:
        assert self._slots is not None
        async with self._slots:
            if event.delivery_id is not None:
                self.leases.started(event.delivery_id)
            await self._process(event)

    def _released(self, event_id: str, delivery_id: str | None, _task: object) -> None:
        self.in_flight.pop(event_id, None)
        if delivery_id is not None:
            self.leases.release(delivery_id)
        if self._window is not None:
            self._window.release()
