"""Tool: synchronous request/response agents (layer 2).

A tool listens on ``action-requests``; its handler returns a result and the SDK
publishes ``{"request_id", "success": true, "result": ...}`` as the *caller's*
``response_event`` on the caller's ``response_topic``, with the request's
``correlation_id``. When the handler raises, the answer is ``success: false`` with
``error`` (the handler's message) and ``error_type`` (its exception's class name); the
caller's ``answer.raise_for_error()`` raises them as ``HandlerFailed``.

An answered request is answered once: the answer is recorded in the memory service
(keyed by tool name and request id) before it is published, and a request that comes
again within ``answer_retention`` seconds is answered with the recorded answer, under
the same event id, without running the handler (see :mod:`soorma.agents._answers`).

A memory-service outage does not make a request run twice: while the record cannot be
read, the handler does not run (the agent runs the request again once the service is
back, as for any ``ServiceUnavailable``); and an answer that cannot be recorded is held
in the process, retried for up to ``record_wait`` seconds, and neither published nor
acked before it is recorded. The price: while the memory service is down a tool
answers nothing (its requests wait, leased, and are answered when it is back). A tool
meant to run without a memory service says so with ``answer_retention=0``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, Unpack

from soorma.agents._answers import (
    DEFAULT_ANSWER_RETENTION,
    DEFAULT_RECORD_WAIT,
    RecordWait,
    answer_event_id,
    keep_answers,
)
from soorma.agents._claims import Once
from soorma.agents._handlers import HandlerSpec, check_handler, make_spec, placeholder
from soorma.agents.base import Agent, AgentArguments
from soorma.context import PlatformContext
from soorma.event import Event
from soorma_common.errors import describe_exception
from soorma_common.events import ACTION_REQUESTS, ACTION_RESULTS, EventEnvelope

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


class Tool(RecordWait, Agent):
    """A stateless request/response agent.

    Example::

        tool = Tool(name="calculator")

        @tool.on_invoke("calculate.requested")
        async def calculate(request, context):
            return {"result": evaluate(request.data["expression"])}

        tool.run()

    Callers use ``bus.request(..., response_event=...)`` or ``bus.call(...)``. A handler
    exception becomes a ``success: false`` answer with ``error`` (``KeyError: 'topic'``)
    and ``error_type`` (``KeyError``); the request is acked, not retried. A
    request without ``response_event`` cannot be answered and is logged and acked.

    Args:
        answer_retention: Seconds an answer is kept for a repeated request (default a
            day; at most 30 days; ``0``: off, and the tool no longer needs the memory
            service). Within it, a request id already answered is answered again from
            the memory service without running the handler.
        record_wait: Seconds an answer waits for an unreachable memory service to
            record it (default 300), its request still leased; after that the request
            is given back and, redelivered, runs again.
        **kwargs: See :class:`~soorma.agents.base.Agent`.
    """

    agent_type = "tool"

    def __init__(
        self,
        *,
        answer_retention: float = DEFAULT_ANSWER_RETENTION,
        record_wait: float = DEFAULT_RECORD_WAIT,
        **kwargs: Unpack[AgentArguments],
    ) -> None:
        super().__init__(**kwargs)
        self.answers = keep_answers(self, answer_retention, record_wait)

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
        async with await self.answers.begin(context, request.request_id) as turn:
            if await turn.resend(context.bus):
                return
            answer = await self._answer(func, request, event, context)
        # Publishing the answer may fail (service down): that raises, the request runs
        # again here and is answered from the record.
        await context.bus.publish_event(answer)

    async def _answer(
        self,
        func: InvokeHandler,
        request: InvocationContext,
        event: Event,
        context: PlatformContext,
    ) -> EventEnvelope:
        """Run the handler and record its answer; the answer to send."""
        assert request.response_event is not None  # checked by _invoke
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
                "error": describe_exception(exc),
                "error_type": type(exc).__name__,
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
        return await self.answers.record(context, request.request_id, answer)


async def run_once(
    context: PlatformContext,
    key: str,
    work: Callable[[], Awaitable[dict[str, Any]]],
    *,
    retention: float = DEFAULT_ANSWER_RETENTION,
    record_wait: float = DEFAULT_RECORD_WAIT,
) -> dict[str, Any]:
    """``work()``'s result, run once per ``key``: the result recorded under ``key`` in
    the memory service if there is one, else ``work()``'s, recorded before it is returned.
    Like a Tool's handler, ``work`` runs under a claim on ``key``: a second call with the
    same key while it runs waits for its result (or for its claim to lapse).

    For handlers that answer with something else than a Tool's answer (e.g. an event
    type chosen by the outcome): use the handled event's id in ``key`` and send what
    this returns under an event id derived from it (docs/reliability.md). A memory
    outage is waited out, as in :class:`Tool`: the look-up raises ``ServiceUnavailable``
    (the agent runs the handler again later; ``work`` did not run) and the result waits
    up to ``record_wait`` seconds to be recorded before it is returned.

    Args:
        context: The handler's context (its memory client is used).
        key: The idempotency key, e.g. ``f"{agent.name}:{event.id}"``.
        work: The effect; returns a JSON object.
        retention: Seconds the result is kept (1 s to 30 days).
        record_wait: Seconds to wait for an unreachable memory service to record it.
    """
    async with await Once.begin(
        context.memory, key, retention=retention, record_wait=record_wait, who=key
    ) as turn:
        if turn.recorded is not None:
            return turn.recorded
        return await turn.record(await work())


__all__ = ["InvocationContext", "Tool", "run_once"]
