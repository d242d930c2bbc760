"""The process-wide tracing switch, shared by the SDK and the platform services.

Tracing is off unless the standard ``OTEL_*`` variables ask for it (see :func:`configure`
and docs/tracing.md). The SDK's span hooks and servicekit's server spans both test
:data:`ENABLED` before doing anything, so with tracing off the hot paths pay one attribute
read and ``opentelemetry`` is not even imported.

What the variables say is a :class:`TracingSettings` value, read with the rest of a
process's settings: by ``soorma.settings.PlatformSettings.from_env`` in an agent or client,
by servicekit's ``TracingSettings`` group in a service. :func:`configure` takes that value
(it reads the environment itself only when called without one, as a script may). This
module, when asked, installs an OpenTelemetry tracer provider; it performs no I/O of its
own.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

logger = logging.getLogger("soorma.tracing")

TRACER_NAME = "soorma"
# Opt-in for prompt and answer text on LLM spans (off: model, tokens and latency only).
RECORD_PROMPTS_ENV = "SOORMA_OTEL_RECORD_PROMPTS"
# The same switch under the name OpenTelemetry's GenAI instrumentations use.
GENAI_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

#: The hot-path switch: hooks do nothing unless this is True.
ENABLED = False
#: Whether LLM spans carry the prompt and answer text.
RECORD_PROMPTS = False

_configured = False
# Set by enable(): the tracer, the W3C propagator and OpenTelemetry's Context class.
_tracer: Any = None
_propagator: Any = None
_Context: Any = None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The span exporters the ``OTEL_*`` variables ask for (empty: tracing stays off).

    ``OTEL_TRACES_EXPORTER`` names them (``otlp``, ``console``; ``none`` for none);
    unset, an ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) means ``otlp``.
    ``OTEL_SDK_DISABLED=true`` wins over both.
    """
    return list(TracingSettings.from_env(environ).exporters)


@dataclass(frozen=True, slots=True, kw_only=True)
class TracingSettings:
    """What the ``OTEL_*`` variables (and ``SOORMA_OTEL_RECORD_PROMPTS``) ask of tracing.

    The default is tracing off. The OpenTelemetry SDK goes on reading its own variables
    (sampler, resource attributes, the exporter's headers and endpoint path...): these
    are only the ones that decide whether Soorma installs a tracer provider, and which.

    Attributes:
        disabled: ``OTEL_SDK_DISABLED=true``: off, whatever else is set.
        exporters: The span exporters asked for (``otlp``, ``console``); see
            :func:`exporter_names`.
        protocol: The OTLP protocol (``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, else
            ``OTEL_EXPORTER_OTLP_PROTOCOL``; ``http/protobuf`` or ``grpc``).
        service_name: ``OTEL_SERVICE_NAME`` (``None``: the process's own name).
        record_prompts: LLM spans carry prompt and answer text
            (``SOORMA_OTEL_RECORD_PROMPTS`` or
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).
    """

    disabled: bool = False
    exporters: tuple[str, ...] = ()
    protocol: str = "http/protobuf"
    service_name: str | None = None
    record_prompts: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TracingSettings:
        """Read the variables from ``environ`` (else ``os.environ``).

        Called by each process's settings (``PlatformSettings.from_env``, servicekit's
        ``TracingSettings``), the one place that process reads its environment.
        """
        env = os.environ if environ is None else environ
        disabled = _truthy(env.get("OTEL_SDK_DISABLED"))
        raw = (env.get("OTEL_TRACES_EXPORTER") or "").strip()
        if disabled:
            exporters: list[str] = []
        elif raw:
            names = [name.strip().lower() for name in raw.split(",") if name.strip()]
            exporters = [name for name in names if name != "none"]
        else:
            endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
                "OTEL_EXPORTER_OTLP_ENDPOINT"
            )
            exporters = ["otlp"] if endpoint else []
        protocol = (
            env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        )
        return cls(
            disabled=disabled,
            exporters=tuple(exporters),
            protocol=protocol.strip().lower(),
            service_name=env.get("OTEL_SERVICE_NAME") or None,
            record_prompts=_truthy(env.get(RECORD_PROMPTS_ENV))
            or _truthy(env.get(GENAI_CONTENT_ENV)),
        )


def configure(
    service_name: str,
    settings: TracingSettings | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Turn tracing on when the settings ask for it; the first call in a process decides.

    Called when an agent starts, when a ``PlatformContext`` is built from the environment
    and when a service app is created, each with the :class:`TracingSettings` it read
    with the rest of its settings. Tracing is on when

    * the settings name an exporter (``OTEL_*``, see :func:`exporter_names`) and
      ``opentelemetry-sdk`` is installed (``pip install 'soorma[otel]'``): a tracer
      provider is installed globally with ``service.name`` = ``OTEL_SERVICE_NAME`` or
      ``service_name``; or
    * the application installed an OpenTelemetry SDK tracer provider itself before:
      the SDK's spans then go to it (unless ``OTEL_SDK_DISABLED=true``).

    Args:
        service_name: ``service.name`` unless ``OTEL_SERVICE_NAME`` is set.
        settings: What the variables asked for; ``None``: read them now, from
            ``environ`` (else ``os.environ``). Only once per process either way.

    Returns:
        Whether tracing is on.
    """
    global _configured
    if ENABLED:
        return True
    if _configured:
        return False
    _configured = True
    if settings is None:
        settings = TracingSettings.from_env(environ)
    if settings.disabled:
        return False
    provider = _installed_provider()
    if provider is None and settings.exporters:
        provider = _build_provider(service_name, settings)
    if provider is None:
        return False
    enable(provider, record_prompts=settings.record_prompts)
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


def _build_provider(service_name: str, settings: TracingSettings) -> Any:
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
    names = settings.exporters
    exporters = [
        exporter for name in names if (exporter := _exporter(name, settings.protocol)) is not None
    ]
    if not exporters:
        return None
    resource = Resource.create({"service.name": settings.service_name or service_name})
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


def _exporter(name: str, protocol: str) -> Any:
    """The span exporter called ``name`` (``otlp`` or ``console``), or None with a warning."""
    try:
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return ConsoleSpanExporter()
        if name == "otlp":
            if protocol == "grpc":
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
    global ENABLED, RECORD_PROMPTS, _tracer, _propagator, _Context
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    provider = tracer_provider or trace.get_tracer_provider()
    _tracer = provider.get_tracer(TRACER_NAME, _version())
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


def inject_headers(headers: dict[str, str], context: Any = None) -> None:
    """Add the ``traceparent``/``tracestate`` of ``context`` (default: the current span)."""
    _propagator.inject(headers, context=context)


def tracer() -> Any:
    """The platform's tracer (only while :data:`ENABLED`)."""
    return _tracer


def enabled() -> bool:
    """Whether tracing is on in this process (read per call: it can be turned on later)."""
    return ENABLED


def _version() -> str:
    try:
        return metadata.version("soorma-common")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


__all__ = [
    "ENABLED",
    "GENAI_CONTENT_ENV",
    "RECORD_PROMPTS",
    "RECORD_PROMPTS_ENV",
    "TracingSettings",
    "configure",
    "disable",
    "enable",
    "enabled",
    "exporter_names",
    "extract",
    "inject_headers",
    "tracer",
]
