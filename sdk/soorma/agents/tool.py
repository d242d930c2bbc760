"""Tool: synchronous request/response agents (layer 2, seed RF-SDK-005).

A tool listens on ``action-requests``; its handler returns a result and the SDK
publishes ``{"request_id", "success": true, "result": ...}`` (or ``success: false`` with
``error``) as the *caller's* ``response_event`` on the caller's ``response_topic``, with
the request's ``correlation_id``.

An answered request is answered once: the answer is recorded in the memory service
(keyed by tool name and request id) before it is published, and a request that comes
again within ``answer_retention`` seconds is answered with the recorded answer, under
the same event id, without running the handler (see :mod:`soorma.agents._answers`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from soorma.agents._answers import DEFAULT_ANSWER_RETENTION, AnswerLog, answer_event_id
from soorma.agents._handlers import HandlerSpec, check_handler, make_spec, placeholder
from soorma.agents.base import Agent
from soorma.context import PlatformContext
from soorma.event import Event
from soorma_common.events import ACTION_REQUESTS, ACTION_RESULTS

logger = logging.getLogger("soorma.tool")

InvokeHandler = Callable[[Any, Any], Awaitable[Any]]
T = TypeVar("T", bound=InvokeHandler)


@dataclass(frozen=True, slots=True)
class InvocationContext:
    """A tool invocation, as passed to an ``on_invoke`` handler.

    Attributes:
        request_id: Id of the request event.
        event_type: The request's event type.
        data: The request payload.
        correlation_id: Correlation id the answer carries.
        response_event: Event type the caller wants the answer as.
        response_topic: Topic the answer goes to.
        session_id: Session of the request.
        plan_id: Plan of the request.
        tenant_id: Tenant of the caller.
        user_id: User of the caller.
        event: The full request event.
    """

    request_id: str
    event_type: str
    data: dict[str, Any]
    correlation_id: str | None
    response_event: str | None
    response_topic: str
    session_id: str | None = None
    plan_id: str | None = None
    tenant_id: str | None = None
    user_id: str | None = None
    event: Event | None = field(default=None, repr=False)

    @classmethod
    def from_event(cls, event: Event) -> InvocationContext:
        """Build the invocation from its request event."""
        return cls(
            request_id=event.id,
            event_type=event.type,
            data=event.data,
            correlation_id=event.correlation_id,
            response_event=event.response_event,
            response_topic=event.response_topic or ACTION_RESULTS,
            session_id=event.session_id,
            plan_id=event.plan_id,
            tenant_id=event.tenant_id,
            user_id=event.user_id,
            event=event,
        )


class Tool(Agent):
    """A stateless request/response agent.

    Example::

        tool = Tool(name="calculator")

        @tool.on_invoke("calculate.requested")
        async def calculate(request, context):
            return {"result": evaluate(request.data["expression"])}

        tool.run()

    Callers use ``bus.request(..., response_event=...)`` or ``bus.call(...)``. A handler
    exception becomes a ``success: false`` answer (the request is acked, not retried); a
    request without ``response_event`` cannot be answered and is logged and acked.

    Args:
        answer_retention: Seconds an answer is kept for a repeated request (default a
            day; at most 30 days; ``0``: off). Within it, a request id already answered
            is answered again from the memory service without running the handler.
        **kwargs: See :class:`~soorma.agents.base.Agent`.
    """

    agent_type = "tool"

    def __init__(
        self, *, answer_retention: float = DEFAULT_ANSWER_RETENTION, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.answers = AnswerLog(self.name, answer_retention)

    def on_invoke(self, event_type: str, *, topic: str = ACTION_REQUESTS) -> Callable[[T], T]:
        """Register ``async def handler(request, context) -> dict`` for ``event_type``.

        Args:
            event_type: Request event type (or glob pattern) to serve.
            topic: Topic requests arrive on (``action-requests``).

        Raises:
            TypeError: the handler is not ``async def f(request, context)``.
            ValueError: invalid topic or empty event type.
        """
        checked = make_spec(
            topic=topic, event_type=event_type, func=placeholder, decorator="on_invoke()"
        )

        def decorator(func: T) -> T:
            check_handler(func, params=("request", "context"), decorator="on_invoke()")

            async def invoke(event: Event, context: PlatformContext) -> None:
                await self._invoke(func, event, context)

            self._add_handler(
                HandlerSpec(
                    topic=checked.topic,
                    event_type=checked.event_type,
                    func=invoke,
                    name=getattr(func, "__qualname__", repr(func)),
                )
            )
            return func

        return decorator

    async def _invoke(self, func: InvokeHandler, event: Event, context: PlatformContext) -> None:
        request = InvocationContext.from_event(event)
        if not request.response_event:
            logger.error(
                "tool %s: request %s (%s) has no response_event; cannot answer it "
                "(callers must use bus.request(..., response_event=...))",
                self.name,
                event.id,
                event.type,
            )
            return
        again = await self.answers.recorded(context, request.request_id)
        if again is not None:
            logger.info(
                "tool %s: request %s was answered before; sending that answer",
                self.name,
                request.request_id,
            )
            await context.bus.publish_event(again)
            return
        try:
            result = await func(request, context)
            data: dict[str, Any] = {
                "request_id": request.request_id,
                "success": True,
                "result": result,
            }
        except Exception as exc:
            logger.warning("tool %s: %s failed: %s", self.name, event.type, exc)
            data = {
                "request_id": request.request_id,
                "success": False,
                "error": f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc),
            }
        answer = context.bus.inherit(
            context.bus.build_event(
                request.response_topic,
                request.response_event,
                data,
                correlation_id=request.correlation_id or request.request_id,
                event_id=answer_event_id(self.name, request.request_id),
            )
        )
        # Recorded before it is sent; if another delivery recorded one first, send that.
        answer = await self.answers.record(context, request.request_id, answer)
        # Publishing the answer may fail (service down): that raises, so the request is
        # nacked and retried, which is what the caller wants.
        await context.bus.publish_event(answer)


__all__ = ["InvocationContext", "Tool"]
