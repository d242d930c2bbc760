"""OpenTelemetry spans for the SDK: publish, delivery, handler runs, client and LLM calls.

Tracing is off unless the standard ``OTEL_*`` variables ask for it (see
:func:`configure` and docs/tracing.md). Every hook in the SDK tests the module-level
:data:`ENABLED` flag before doing anything, so with tracing off the hot paths pay one
attribute read and ``opentelemetry`` is not even imported.

What crosses the bus is the W3C trace context: a publish starts a ``PRODUCER`` span and
writes its ``traceparent``/``tracestate`` into the envelope; the consumer's ``process``
span takes that context as its parent, so everything a handler does (its publishes,
memory and registry calls, LLM calls, and the services' server spans behind them) joins
the trace of the event that caused it.

(Over 400 lines: every span kind the SDK emits lives here so that the rest of the SDK
calls one-line hooks guarded by one flag; splitting it would spread that flag check.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import FrameType

    from soorma_common.events import EventEnvelope

logger = logging.getLogger("soorma.tracing")

TRACER_NAME = "soorma"
# Opt-in for prompt and answer text on LLM spans (off: model, tokens and latency only).
RECORD_PROMPTS_ENV = "SOORMA_OTEL_RECORD_PROMPTS"
# The same switch under the name OpenTelemetry's GenAI instrumentations use.
GENAI_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
MESSAGING_SYSTEM = "soorma"

#: The hot-path switch: hooks do nothing unless this is True.
ENABLED = False
#: Whether LLM spans carry the prompt and answer text.
RECORD_PROMPTS = False

_configured = False
# Set by enable(): the tracer, the ``opentelemetry.trace`` module and the W3C propagator.
_tracer: Any = None
_trace: Any = None
_propagator: Any = None
_Context: Any = None

_NULL: contextlib.nullcontext[None] = contextlib.nullcontext()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The span exporters the ``OTEL_*`` variables ask for (empty: tracing stays off).

    ``OTEL_TRACES_EXPORTER`` names them (``otlp``, ``console``; ``none`` for none);
    unset, an ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) means ``otlp``.
    ``OTEL_SDK_DISABLED=true`` wins over both.
    """
    if _truthy(environ.get("OTEL_SDK_DISABLED")):
        return []
    raw = (environ.get("OTEL_TRACES_EXPORTER") or "").strip()
    if not raw:
        endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        return ["otlp"] if endpoint else []
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    return [name for name in names if name != "none"]


def configure(service_name: str, *, environ: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on when the environment asks for it; the first call in a process decides.

    Called when an agent starts, when a ``PlatformContext`` is built from the environment
    and when a service app is created. Tracing is on when

    * the ``OTEL_*`` variables name an exporter (see :func:`exporter_names`) and
      ``opentelemetry-sdk`` is installed (``pip install 'soorma[otel]'``): a tracer
      provider is installed globally with ``service.name`` = ``OTEL_SERVICE_NAME`` or
      ``service_name``; or
    * the application installed an OpenTelemetry SDK tracer provider itself before:
      the SDK's spans then go to it (unless ``OTEL_SDK_DISABLED=true``).

    Returns:
        Whether tracing is on.
    """
    global _configured
    if ENABLED:
        return True
    if _configured:
        return False
    _configured = True
    env = os.environ if environ is None else environ
    if _truthy(env.get("OTEL_SDK_DISABLED")):
        return False
    record_prompts = _truthy(env.get(RECORD_PROMPTS_ENV)) or _truthy(env.get(GENAI_CONTENT_ENV))
    provider = _installed_provider()
    names = exporter_names(env)
    if provider is None and names:
        provider = _build_provider(service_name, names, env)
    if provider is None:
        return False
    enable(provider, record_prompts=record_prompts)
    return True


def _installed_provider() -> Any:
    """The application's own SDK tracer provider, if it set one (no import otherwise)."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


def _build_provider(service_name: str, names: Sequence[str], env: Mapping[str, str]) -> Any:
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(
            "OTEL_* variables ask for traces, but opentelemetry-sdk is not installed: "
            "`pip install 'soorma[otel]'`; tracing stays off"
        )
        return None
    exporters = [exporter for name in names if (exporter := _exporter(name, env)) is not None]
    if not exporters:
        return None
    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or service_name})
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    logger.info(
        "tracing on: service.name=%s exporters=%s",
        resource.attributes.get("service.name"),
        ",".join(names),
    )
    return provider


def _exporter(name: str, env: Mapping[str, str]) -> Any:
    """The span exporter called ``name`` (``otlp`` or ``console``), or None with a warning."""
    try:
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return ConsoleSpanExporter()
        if name == "otlp":
            protocol = (
                env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf"
            )
            if protocol.strip().lower() == "grpc":
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                    OTLPSpanExporter,
                )
            else:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
            return OTLPSpanExporter()
    except ImportError as exc:
        logger.warning(
            "OTEL_TRACES_EXPORTER=%s needs a package that is not installed (%s): "
            "`pip install 'soorma[otel]'` brings the OTLP/HTTP exporter",
            name,
            exc.name,
        )
        return None
    logger.warning("OTEL_TRACES_EXPORTER=%s is not supported (use otlp or console)", name)
    return None


def enable(tracer_provider: Any = None, *, record_prompts: bool = False) -> None:
    """Emit spans to ``tracer_provider`` (default: the global one) from now on.

    :func:`configure` calls this; tests call it with a provider of their own (e.g. one
    with an ``InMemorySpanExporter``) and :func:`disable` afterwards.
    """
    global ENABLED, RECORD_PROMPTS, _tracer, _trace, _propagator, _Context
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    import soorma

    provider = tracer_provider or trace.get_tracer_provider()
    _tracer = provider.get_tracer(TRACER_NAME, soorma.__version__)
    _trace = trace
    _propagator = TraceContextTextMapPropagator()
    _Context = Context
    RECORD_PROMPTS = record_prompts
    ENABLED = True


def disable() -> None:
    """Stop emitting spans (the next :func:`configure` reads the environment again)."""
    global ENABLED, RECORD_PROMPTS, _configured, _tracer
    ENABLED = False
    RECORD_PROMPTS = False
    _configured = False
    _tracer = None


# -- context ---------------------------------------------------------------------------


def extract(traceparent: str | None, tracestate: str | None = None) -> Any:
    """The OpenTelemetry context a ``traceparent`` names (an empty one without it).

    Never the ambient context: a span parented by this has exactly the parent the
    event (or request) carried.
    """
    if not traceparent:
        return _Context()
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    return _propagator.extract(carrier, context=_Context())


def inject_headers(headers: dict[str, str]) -> None:
    """Add the current span's ``traceparent``/``tracestate`` to outgoing HTTP headers."""
    _propagator.inject(headers)


def tracer() -> Any:
    """The SDK's tracer (only while :data:`ENABLED`)."""
    return _tracer


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
    trace = _trace
    spans: list[Any] = []
    dumped: list[dict[str, Any]] = []
    current_valid = trace.get_current_span().get_span_context().is_valid
    for envelope in envelopes:
        parent = None
        if not current_valid and envelope.traceparent:
            # Nothing traced around us, but the envelope names its parent: keep it.
            parent = extract(envelope.traceparent, envelope.tracestate)
        span = _tracer.start_span(
            f"publish {envelope.type}",
            context=parent,
            kind=trace.SpanKind.PRODUCER,
            attributes=_event_attributes(envelope, "publish"),
        )
        spans.append(span)
        carrier: dict[str, str] = {}
        _propagator.inject(carrier, context=trace.set_span_in_context(span))
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
    attributes = _event_attributes(event, "receive")
    if delivery_id:
        attributes["soorma.delivery_id"] = delivery_id
    _tracer.start_span(
        f"receive {event.type}",
        context=extract(event.traceparent, event.tracestate),
        kind=_trace.SpanKind.CONSUMER,
        attributes=attributes,
    ).end()


def handler_span(event: EventEnvelope, agent: str) -> contextlib.AbstractContextManager[None]:
    """The ``process`` span around an agent's handlers for ``event`` (no-op when off).

    Its parent is the context the event carries, not the agent's own: the handlers'
    work continues the trace of whoever published the event.
    """
    if not ENABLED:
        return _NULL
    return _process_span(event, agent)


@contextlib.contextmanager
def _process_span(event: EventEnvelope, agent: str) -> Iterator[None]:
    attributes = _event_attributes(event, "process")
    attributes["messaging.consumer.group.name"] = agent
    delivery_id = getattr(event, "delivery_id", None)
    if delivery_id:
        attributes["soorma.delivery_id"] = delivery_id
    span = _tracer.start_span(
        f"process {event.type}",
        context=extract(event.traceparent, event.tracestate),
        kind=_trace.SpanKind.CONSUMER,
        attributes=attributes,
    )
    with _trace.use_span(span, end_on_exit=True, record_exception=False):
        yield


def handler_failed(exc: BaseException) -> None:
    """Mark the current ``process`` span failed (the agent catches handler errors)."""
    if ENABLED:
        _failed(_trace.get_current_span(), exc)


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
    operation = _operation(type(client).__name__) or method
    span = _tracer.start_span(
        f"{component}.{operation}",
        kind=_trace.SpanKind.CLIENT,
        attributes={
            "soorma.component": component,
            "http.request.method": method,
            "url.path": path,
        },
    )
    with _trace.use_span(
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
    if not ENABLED:
        return _NULL
    return _llm_span(model, messages, temperature)


@contextlib.contextmanager
def _llm_span(
    model: str, messages: Sequence[Mapping[str, str]], temperature: float
) -> Iterator[Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.request.temperature": temperature,
    }
    if "/" in model:
        attributes["gen_ai.provider.name"] = model.split("/", 1)[0]
    if RECORD_PROMPTS:
        attributes["gen_ai.input.messages"] = json.dumps([dict(m) for m in messages])
    span = _tracer.start_span(f"chat {model}", kind=_trace.SpanKind.CLIENT, attributes=attributes)
    with _trace.use_span(
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
    if RECORD_PROMPTS:
        span.set_attribute("gen_ai.output.messages", answer.content)


__all__ = [
    "ENABLED",
    "RECORD_PROMPTS",
    "RECORD_PROMPTS_ENV",
    "client_call",
    "configure",
    "delivered",
    "disable",
    "enable",
    "exporter_names",
    "extract",
    "handler_failed",
    "handler_span",
    "inject_headers",
    "llm_answer",
    "llm_span",
    "publish",
    "tracer",
]
