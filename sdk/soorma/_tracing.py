"""OpenTelemetry spans for the SDK: publish, delivery, handler runs, client and LLM calls.

The switch (``OTEL_*`` set-up, :data:`soorma_common.tracing.ENABLED`) lives in
:mod:`soorma_common.tracing`, shared with the services; every hook here is called only
while it is on, so with tracing off the hot paths pay one attribute read and
``opentelemetry`` is not even imported.

What crosses the bus is the W3C trace context: a publish starts a ``PRODUCER`` span and
writes its ``traceparent``/``tracestate`` into the envelope; the consumer's ``process``
span takes that context as its parent, so everything a handler does (its publishes,
memory and registry calls, LLM calls, and the services' server spans behind them) joins
the trace of the event that caused it.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from soorma_common import tracing as otel

if TYPE_CHECKING:
    from types import FrameType

    from soorma_common.events import EventEnvelope

MESSAGING_SYSTEM = "soorma"

_NULL: contextlib.nullcontext[None] = contextlib.nullcontext()


def _event_attributes(event: EventEnvelope, operation: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.name": operation,
        "messaging.destination.name": event.topic,
        "messaging.message.id": event.id,
        "soorma.event.type": event.type,
    }
    if event.correlation_id:
        attributes["messaging.message.conversation_id"] = event.correlation_id
    for name in ("plan_id", "goal_id", "session_id", "tenant_id"):
        value = getattr(event, name)
        if value:
            attributes[f"soorma.{name}"] = value
    return attributes


# -- publish ---------------------------------------------------------------------------


async def publish(
    dispatch: Callable[..., Awaitable[list[str]]],
    envelopes: Sequence[EventEnvelope],
    tenant_id: str | None,
    user_id: str | None,
    *,
    single: bool,
    validate: Callable[[EventEnvelope], Awaitable[None]] | None = None,
) -> list[str]:
    """Check (``validate``) and publish ``envelopes``, one ``PRODUCER`` span each.

    Each envelope leaves with its span's ``traceparent``/``tracestate``; an envelope that
    starts a chain (``trace_id`` unset or its own id) gets the span's W3C trace id as
    ``trace_id``. The publish request itself carries the first span's context, so the
    event service's server span joins that trace.
    """
    from opentelemetry import trace

    spans: list[Any] = []
    dumped: list[dict[str, Any]] = []
    current_valid = trace.get_current_span().get_span_context().is_valid
    for envelope in envelopes:
        parent = None
        if not current_valid and envelope.traceparent:
            # Nothing traced around us, but the envelope names its parent: keep it.
            parent = otel.extract(envelope.traceparent, envelope.tracestate)
        span = otel.tracer().start_span(
            f"publish {envelope.type}",
            context=parent,
            kind=trace.SpanKind.PRODUCER,
            attributes=_event_attributes(envelope, "publish"),
        )
        spans.append(span)
        carrier: dict[str, str] = {}
        otel.inject_headers(carrier, trace.set_span_in_context(span))
        update: dict[str, Any] = {}
        if "traceparent" in carrier:
            update["traceparent"] = carrier["traceparent"]
            update["tracestate"] = carrier.get("tracestate") or None
            if envelope.trace_id is None or envelope.trace_id == envelope.id:
                update["trace_id"] = trace.format_trace_id(span.get_span_context().trace_id)
        if update:
            envelope = envelope.model_copy(update=update)
        dumped.append(envelope.model_dump(mode="json", exclude_none=True))
    try:
        with trace.use_span(
            spans[0], end_on_exit=False, record_exception=False, set_status_on_exception=False
        ):
            if validate is not None:  # e.g. the registry's schema check: inside the span
                for envelope in envelopes:
                    await validate(envelope)
            return await dispatch(dumped, tenant_id, user_id, single=single)
    except BaseException as exc:
        for span in spans:
            _failed(span, exc)
        raise
    finally:
        for span in spans:
            span.end()


def _failed(span: Any, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.record_exception(exc)
    span.set_attribute("error.type", type(exc).__name__)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:256]))


# -- delivery and handler runs ---------------------------------------------------------


def delivered(event: EventEnvelope, delivery_id: str | None) -> None:
    """A ``receive`` span marking the moment a stream delivered ``event``."""
    from opentelemetry import trace

    attributes = _event_attributes(event, "receive")
    if delivery_id:
        attributes["soorma.delivery_id"] = delivery_id
    otel.tracer().start_span(
        f"receive {event.type}",
        context=otel.extract(event.traceparent, event.tracestate),
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
    ).end()


def handler_span(event: EventEnvelope, agent: str) -> contextlib.AbstractContextManager[None]:
    """The ``process`` span around an agent's handlers for ``event`` (no-op when off).

    Its parent is the context the event carries, not the agent's own: the handlers'
    work continues the trace of whoever published the event.
    """
    if not otel.ENABLED:
        return _NULL
    return _process_span(event, agent)


@contextlib.contextmanager
def _process_span(event: EventEnvelope, agent: str) -> Iterator[None]:
    from opentelemetry import trace

    attributes = _event_attributes(event, "process")
    attributes["messaging.consumer.group.name"] = agent
    delivery_id = getattr(event, "delivery_id", None)
    if delivery_id:
        attributes["soorma.delivery_id"] = delivery_id
    span = otel.tracer().start_span(
        f"process {event.type}",
        context=otel.extract(event.traceparent, event.tracestate),
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
    )
    with trace.use_span(span, end_on_exit=True, record_exception=False):
        yield


def handler_failed(exc: BaseException) -> None:
    """Mark the current ``process`` span failed (the agent catches handler errors)."""
    if otel.ENABLED:
        from opentelemetry import trace

        _failed(trace.get_current_span(), exc)


# -- client calls ----------------------------------------------------------------------


def _operation(client: str) -> str | None:
    """The public client method (``get_plan_context``) this request is made for.

    Read from the call stack, so span names stay few and readable without every client
    method naming itself; private helpers and nested functions are skipped.
    """
    frame: FrameType | None = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            return None
        parts = frame.f_code.co_qualname.split(".")
        if len(parts) >= 2 and parts[0] == client and not parts[1].startswith("_"):
            return parts[1]
        frame = frame.f_back
    return None


async def client_call(
    component: str,
    client: object,
    send: Callable[..., Awaitable[Any]],
    method: str,
    path: str,
    **kwargs: Any,
) -> Any:
    """Run ``send(method, path, **kwargs)`` in a ``CLIENT`` span ``<component>.<method>``."""
    from opentelemetry import trace

    operation = _operation(type(client).__name__) or method
    span = otel.tracer().start_span(
        f"{component}.{operation}",
        kind=trace.SpanKind.CLIENT,
        attributes={
            "soorma.component": component,
            "http.request.method": method,
            "url.path": path,
        },
    )
    with trace.use_span(
        span, end_on_exit=True, record_exception=False, set_status_on_exception=False
    ):
        try:
            return await send(method, path, **kwargs)
        except BaseException as exc:
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and status < 500:
                # A miss or a conflict is an answer the SDK handles (None, a retry),
                # not a failure of the call: noted, not marked.
                span.set_attribute("http.response.status_code", status)
                span.set_attribute("error.type", type(exc).__name__)
            else:
                _failed(span, exc)
            raise


# -- LLM calls -------------------------------------------------------------------------


def llm_span(
    model: str, messages: Sequence[Mapping[str, str]], temperature: float
) -> contextlib.AbstractContextManager[Any]:
    """A ``chat <model>`` span around one LLM call (no-op when off; yields the span)."""
    if not otel.ENABLED:
        return _NULL
    return _llm_span(model, messages, temperature)


@contextlib.contextmanager
def _llm_span(
    model: str, messages: Sequence[Mapping[str, str]], temperature: float
) -> Iterator[Any]:
    from opentelemetry import trace

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.request.temperature": temperature,
    }
    if "/" in model:
        attributes["gen_ai.provider.name"] = model.split("/", 1)[0]
    if otel.RECORD_PROMPTS:
        attributes["gen_ai.input.messages"] = json.dumps([dict(m) for m in messages])
    span = otel.tracer().start_span(
        f"chat {model}", kind=trace.SpanKind.CLIENT, attributes=attributes
    )
    with trace.use_span(
        span, end_on_exit=True, record_exception=False, set_status_on_exception=False
    ):
        try:
            yield span
        except BaseException as exc:
            _failed(span, exc)
            raise


def llm_answer(span: Any, answer: Any, response_model: str | None) -> None:
    """Record the answer's model, token counts and latency (and text when opted in).

    ``answer`` is a :class:`soorma.ai._llm.Completion`; ``span`` is what
    :func:`llm_span` yielded (``None`` when off).
    """
    if span is None:
        return
    if isinstance(response_model, str) and response_model:
        span.set_attribute("gen_ai.response.model", response_model)
    for ours, theirs in (
        ("prompt_tokens", "gen_ai.usage.input_tokens"),
        ("completion_tokens", "gen_ai.usage.output_tokens"),
    ):
        if ours in answer.tokens:
            span.set_attribute(theirs, answer.tokens[ours])
    span.set_attribute("soorma.llm.latency_ms", round(answer.latency_ms, 3))
    if otel.RECORD_PROMPTS:
        span.set_attribute("gen_ai.output.messages", answer.content)


__all__ = [
    "client_call",
    "delivered",
    "handler_failed",
    "handler_span",
    "llm_answer",
    "llm_span",
    "publish",
]
