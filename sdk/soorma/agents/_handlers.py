"""Handler records and decoration-time validation shared by every agent type."""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from soorma._names import check_event_type, check_topic

EventHandler = Callable[[Any, Any], Awaitable[Any]]
LifecycleHook = Callable[[], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """One registered handler: the (topic, event-type pattern) it serves."""

    topic: str
    event_type: str
    func: EventHandler
    name: str

    def matches(self, topic: str, event_type: str) -> bool:
        """Whether an event on ``topic`` of ``event_type`` goes to this handler."""
        return topic == self.topic and fnmatch.fnmatchcase(event_type, self.event_type)


def check_handler(func: object, *, params: tuple[str, ...], decorator: str) -> None:
    """Fail at decoration time unless ``func`` is ``async def f(<params>)``.

    Raises:
        TypeError: not a coroutine function, or it cannot be called with
            ``len(params)`` positional arguments.
    """
    wanted = f"async def handler({', '.join(params)})"
    if not callable(func):
        raise TypeError(f"{decorator} must decorate a function: {wanted}")
    name = getattr(func, "__qualname__", repr(func))
    if not inspect.iscoroutinefunction(func):
        raise TypeError(f"{decorator}: handler {name} must be a coroutine function: {wanted}")
    try:
        inspect.signature(func).bind(*params)
    except TypeError:
        raise TypeError(
            f"{decorator}: handler {name}{inspect.signature(func)} must accept "
            f"{len(params)} positional arguments: {wanted}"
        ) from None


def check_hook(func: object, *, decorator: str) -> None:
    """Fail at decoration time unless ``func`` is ``async def f()``."""
    if not inspect.iscoroutinefunction(func):
        raise TypeError(f"{decorator} must decorate a coroutine function: async def hook()")
    try:
        inspect.signature(func).bind()
    except TypeError:
        raise TypeError(f"{decorator}: hook must take no arguments: async def hook()") from None


def make_spec(
    *, topic: object, event_type: object, func: EventHandler, decorator: str
) -> HandlerSpec:
    """Validate a subscription and build its record."""
    try:
        check_topic(topic)
        check_event_type(event_type)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{decorator}: {exc}") from None
    return HandlerSpec(
        topic=str(topic),
        event_type=str(event_type),
        func=func,
        name=getattr(func, "__qualname__", repr(func)),
    )


async def placeholder(event: Any, context: Any) -> None:
    """Stands in for the handler while validating decorator arguments."""
