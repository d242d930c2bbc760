"""Dispatch: which handlers an event goes to, and running one through service restarts."""

from __future__ import annotations

import logging

from soorma._concurrency import retry_while_unavailable
from soorma.agents._handlers import HandlerSpec
from soorma.context import PlatformContext
from soorma.event import Event
from soorma_common.errors import ServiceUnavailable

logger = logging.getLogger("soorma.agent")

DISPATCH_CACHE_SIZE = 4096
# How long a handler failing with ServiceUnavailable is run again before it is nacked.
UNAVAILABLE_RETRY_SECONDS = 60.0


class DispatchTable:
    """An agent's handlers, and a cache of which ones match a (topic, event type)."""

    def __init__(self) -> None:
        self.handlers: list[HandlerSpec] = []
        # Event types are few and globbing is not free.
        self._cache: dict[tuple[str, str], list[HandlerSpec]] = {}

    def add(self, spec: HandlerSpec) -> None:
        """Record a handler."""
        self.handlers.append(spec)
        self._cache.clear()

    @property
    def topics(self) -> list[str]:
        """Topics the handlers listen on, sorted."""
        return sorted({spec.topic for spec in self.handlers})

    @property
    def event_type_filters(self) -> list[str] | None:
        """Event-type patterns to send to the service (``None``: no filter)."""
        patterns = {spec.event_type for spec in self.handlers}
        return None if "*" in patterns else sorted(patterns)

    def matching(self, event: Event) -> list[HandlerSpec]:
        """Handlers for the event's (topic, type), each function once, cached.

        A function registered under overlapping patterns runs once per event.
        """
        key = (event.topic, event.type)
        found = self._cache.get(key)
        if found is None:
            found, seen = [], set()
            for spec in self.handlers:
                if spec.matches(event.topic, event.type) and id(spec.func) not in seen:
                    seen.add(id(spec.func))
                    found.append(spec)
            if len(self._cache) < DISPATCH_CACHE_SIZE:
                self._cache[key] = found
        return found


async def call_while_unavailable(
    spec: HandlerSpec, event: Event, context: PlatformContext, *, agent: str
) -> None:
    """Run the handler; while a platform service is unavailable, run it again.

    A service down for a restart (``ServiceUnavailable``: refused, or lost mid-request)
    is waited out here, with backoff, for up to ``UNAVAILABLE_RETRY_SECONDS``: a nack
    would redeliver at once and spend the event's ``max_deliveries`` within seconds,
    dead-lettering work that only had to wait. The lease is renewed meanwhile (the
    delivery is still held). The pauses are slept on ``context.clock``.
    """

    def say(exc: ServiceUnavailable, pause: float, _waited: float) -> None:
        logger.warning(
            "agent %s: %s on %s (%s): %s; running it again in %.1f s",
            agent,
            spec.name,
            event.type,
            event.id,
            exc,
            pause,
        )

    async def run() -> None:
        await spec.func(event, context)

    await retry_while_unavailable(
        run,
        wait=UNAVAILABLE_RETRY_SECONDS,
        first_pause=0.5,
        max_pause=8.0,
        on_retry=say,
        clock=context.clock,
    )
