"""Server spans for every HTTP request a service answers (docs/tracing.md).

:class:`TracingMiddleware` is pure ASGI, like the rest of the stack: it starts a
``SERVER`` span whose parent is the request's ``traceparent``/``tracestate`` headers (never
the ambient context), so a request made from a traced agent's handler shows up inside
that handler's trace. Streaming responses (SSE) are not buffered; their span ends when the
stream does.

Tracing is configured once per process from the ``OTEL_*`` variables, which the service
reads with the rest of its settings (:class:`servicekit.settings.TracingSettings`), by the
platform's switch (:mod:`soorma_common.tracing`, shared with the SDK), when a service app
is built:
:func:`tracing_middleware` is the outermost entry of ``servicekit.app.PLATFORM_MIDDLEWARES``,
so the span covers the whole stack, fast paths included. With tracing off it adds nothing
and requests pay nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servicekit.settings import ServiceSettings, TracingSettings
from soorma_common import tracing as otel


def tracing_settings(settings: TracingSettings) -> otel.TracingSettings:
    """What the service's ``OTEL_*`` settings ask for, read as the SDK reads them."""
    variables = {
        "OTEL_SDK_DISABLED": settings.otel_sdk_disabled,
        "OTEL_TRACES_EXPORTER": settings.otel_traces_exporter,
        "OTEL_EXPORTER_OTLP_ENDPOINT": settings.otel_exporter_otlp_endpoint,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": settings.otel_exporter_otlp_traces_endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": settings.otel_exporter_otlp_protocol,
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": settings.otel_exporter_otlp_traces_protocol,
        "OTEL_SERVICE_NAME": settings.otel_service_name,
        otel.GENAI_CONTENT_ENV: settings.otel_instrumentation_genai_capture_message_content,
        otel.RECORD_PROMPTS_ENV: settings.otel_record_prompts,
    }
    return otel.TracingSettings.from_env({k: v for k, v in variables.items() if v is not None})


def configure_tracing(service_name: str, settings: TracingSettings) -> bool:
    """Turn tracing on for this process when its ``OTEL_*`` settings ask; whether it is on."""
    return otel.configure(service_name, tracing_settings(settings))


def tracing_middleware(service_name: str, settings: ServiceSettings) -> Middleware | None:
    """The platform-middleware entry: :class:`TracingMiddleware` when tracing is on."""
    if not configure_tracing(service_name, settings):
        return None
    return Middleware(TracingMiddleware, service=service_name)


class TracingMiddleware:
    """A ``SERVER`` span per HTTP request: ``<METHOD> <route>`` (``<METHOD>`` off-route).

    Attributes follow OpenTelemetry's HTTP conventions (``http.request.method``,
    ``url.path``, ``http.route``, ``http.response.status_code``); a 5xx marks the span
    failed. ``service`` is recorded as ``soorma.service``.
    """

    def __init__(self, app: ASGIApp, *, service: str) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not otel.ENABLED:
            await self.app(scope, receive, send)
            return
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        traceparent = tracestate = None
        for key, value in scope["headers"]:
            if key == b"traceparent":
                traceparent = value.decode("latin-1")
            elif key == b"tracestate":
                tracestate = value.decode("latin-1")
        method = scope.get("method", "GET")
        attributes: dict[str, Any] = {
            "http.request.method": method,
            "url.path": scope.get("path", ""),
            "soorma.service": self.service,
        }
        span = otel.tracer().start_span(
            method,
            context=otel.extract(traceparent, tracestate),
            kind=trace.SpanKind.SERVER,
            attributes=attributes,
        )
        status = 0
        # FastAPI >= 0.165 traces requests itself once a global tracer provider is set;
        # this span already covers the whole stack (fast paths too), and FastAPI leaves
        # a request alone whose scope carries this key: one SERVER span per request.
        scope["fastapi.telemetry"] = None

        async def send_traced(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            try:
                await self.app(scope, receive, send_traced)
            except asyncio.CancelledError:
                raise  # the client went away (e.g. closed its stream): not a failure
            except BaseException as exc:
                # Starlette's outermost error middleware answers it with a 500.
                status = status or 500
                span.record_exception(exc)
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise
            finally:
                # Known once routing ran; fast paths answering ahead of it have none.
                route = getattr(scope.get("route"), "path", None)
                if route:
                    span.set_attribute("http.route", route)
                    span.update_name(f"{method} {route}")
                if status:
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))


__all__ = ["TracingMiddleware", "configure_tracing", "tracing_middleware", "tracing_settings"]
