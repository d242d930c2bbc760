"""EventRecorder: every event published on the harness's event service, in order.

The harness's transport hands each successful publish (single or batch) to the recorder
before the publisher sees the answer, so an event is in the recorder as soon as the
``await bus.publish(...)`` that sent it has returned: no stream to wait for, no race.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from soorma.event import Event

DEFAULT_WAIT_TIMEOUT = 5.0
PUBLISH_PATH = "/v1/events/publish"
PUBLISH_BATCH_PATH = "/v1/events/publish-batch"

EventPredicate = Callable[[Event], bool]


class EventRecorder:
    """The events published during a harness's life, oldest first.

    Args:
        default_tenant: Tenant the event service assigns when a publisher sends none.
        default_user: User the event service assigns when a publisher sends none.
        diagnose: Called when a wait times out; what it returns is added to the error.
    """

    def __init__(
        self,
        *,
        default_tenant: str = "default",
        default_user: str = "anonymous",
        diagnose: Callable[[], str] | None = None,
    ) -> None:
        self.default_tenant = default_tenant
        self.default_user = default_user
        self.diagnose = diagnose
        self._events: list[Event] = []
        self._waiters: set[asyncio.Future[None]] = set()

    def __len__(self) -> int:
        return len(self._events)

    def clear(self) -> None:
        """Forget the events recorded so far."""
        self._events.clear()

    def record(self, events: Iterable[Event]) -> None:
        """Add published events (wakes :meth:`wait_for`)."""
        self._events.extend(events)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    def record_exchange(
        self, request: httpx.Request, status: int, body: bytes, answer: bytes
    ) -> None:
        """Record the events of one successful publish request (transport hook)."""
        if not 200 <= status < 300:
            return
        try:
            sent = json.loads(body)
        except ValueError:
            return
        envelopes = [sent.get("event")] if "event" in sent else list(sent.get("events") or [])
        tenant = request.headers.get("x-tenant-id") or self.default_tenant
        user = request.headers.get("x-user-id") or self.default_user
        self.record(
            Event.model_validate({**envelope, "tenant_id": tenant, "user_id": user})
            for envelope in envelopes
            if isinstance(envelope, dict)
        )

    def events(
        self,
        type: str | None = None,
        *,
        topic: str | None = None,
        correlation_id: str | None = None,
        plan_id: str | None = None,
        tenant_id: str | None = None,
        source: str | None = None,
        where: EventPredicate | None = None,
    ) -> list[Event]:
        """Recorded events matching every filter given, oldest first.

        Args:
            type: Event type or glob pattern (``"task.*"``).
            topic: Topic (or glob pattern).
            correlation_id: Exact correlation id.
            plan_id: Exact plan id.
            tenant_id: Exact tenant id.
            source: Publisher (agent name, or glob pattern).
            where: Any further check.
        """
        match = _matcher(type, topic, correlation_id, plan_id, tenant_id, source, where)
        return [event for event in self._events if match(event)]

    def by_topic(self) -> dict[str, list[Event]]:
        """The recorded events grouped by topic (topics in first-seen order)."""
        grouped: dict[str, list[Event]] = {}
        for event in self._events:
            grouped.setdefault(event.topic, []).append(event)
        return grouped

    def by_type(self) -> dict[str, list[Event]]:
        """The recorded events grouped by event type (types in first-seen order)."""
        grouped: dict[str, list[Event]] = {}
        for event in self._events:
            grouped.setdefault(event.type, []).append(event)
        return grouped

    async def wait_for(
        self,
        type: str | None = None,
        *,
        topic: str | None = None,
        correlation_id: str | None = None,
        plan_id: str | None = None,
        tenant_id: str | None = None,
        source: str | None = None,
        where: EventPredicate | None = None,
        count: int = 1,
        timeout: float = DEFAULT_WAIT_TIMEOUT,  # noqa: ASYNC109 - a test helper's deadline
    ) -> Event:
        """Wait until ``count`` matching events were published (past ones count).

        Returns:
            The ``count``-th matching event.

        Raises:
            TimeoutError: fewer matching events within ``timeout`` seconds; the message
                lists the event types that were published instead.
        """
        match = _matcher(type, topic, correlation_id, plan_id, tenant_id, source, where)
        seen = 0
        checked = 0
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    checked = min(checked, len(self._events))  # clear() may have run
                    for event in self._events[checked:]:
                        if match(event):
                            seen += 1
                            if seen == count:
                                return event
                    checked = len(self._events)
                    waiter: asyncio.Future[None] = loop.create_future()
                    self._waiters.add(waiter)
                    try:
                        await waiter
                    finally:
                        self._waiters.discard(waiter)
        except TimeoutError:
            wanted = (
                ", ".join(
                    f"{name}={value!r}"
                    for name, value in (
                        ("type", type),
                        ("topic", topic),
                        ("correlation_id", correlation_id),
                        ("plan_id", plan_id),
                        ("tenant_id", tenant_id),
                        ("source", source),
                    )
                    if value is not None
                )
                or "any event"
            )
            published = ", ".join(e.type for e in self._events[-20:]) or "nothing"
            hint = self.diagnose() if self.diagnose is not None else ""
            raise TimeoutError(
                f"{seen} of {count} event(s) matching {wanted}"
                f"{' (and where=...)' if where else ''} within {timeout:g} s; "
                f"last published: {published}{'; ' + hint if hint else ''}"
            ) from None


def _matcher(
    type_: str | None,
    topic: str | None,
    correlation_id: str | None,
    plan_id: str | None,
    tenant_id: str | None,
    source: str | None,
    where: EventPredicate | None,
) -> EventPredicate:
    def glob(pattern: str | None, value: str | None) -> bool:
        return pattern is None or (value is not None and fnmatch.fnmatchcase(value, pattern))

    def exact(expected: str | None, value: str | None) -> bool:
        return expected is None or expected == value

    def match(event: Event) -> bool:
        return (
            glob(type_, event.type)
            and glob(topic, event.topic)
            and glob(source, event.source)
            and exact(correlation_id, event.correlation_id)
            and exact(plan_id, event.plan_id)
            and exact(tenant_id, event.tenant_id)
            and (where is None or where(event))
        )

    return match


def describe(events: Iterable[Event]) -> list[dict[str, Any]]:
    """A compact view of events for assertion messages (type, topic, correlation)."""
    return [
        {"type": e.type, "topic": e.topic, "correlation_id": e.correlation_id, "source": e.source}
        for e in events
    ]


__all__ = ["DEFAULT_WAIT_TIMEOUT", "EventPredicate", "EventRecorder", "describe"]
