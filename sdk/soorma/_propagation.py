"""The event a handler is currently processing, so publishes can inherit its context.

A ``ContextVar`` (not a global) keeps concurrent handlers apart: each dispatch task
sees only its own event, and code outside a handler sees ``None``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from soorma_common.events import EventEnvelope

_current_event: ContextVar[EventEnvelope | None] = ContextVar("soorma_current_event", default=None)


def current_event() -> EventEnvelope | None:
    """The event being handled in this task, or ``None`` outside a handler."""
    return _current_event.get()


@contextmanager
def handling(event: EventEnvelope) -> Iterator[None]:
    """Mark ``event`` as the one being handled for the duration of the block."""
    token = _current_event.set(event)
    try:
        yield
    finally:
        _current_event.reset(token)
