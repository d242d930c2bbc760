"""A2A protocol gateway for external clients."""

import os

from servicekit.settings import TracingSettings
from servicekit.tracing import tracing_settings

# a2a-sdk wraps every handler call in an OpenTelemetry span. With the platform's tracing
# off (no OTEL_* exporter, docs/tracing.md) those spans go nowhere and cost CPU per
# request, so they are off unless OTEL_INSTRUMENTATION_A2A_SDK_ENABLED says otherwise
# (read when a2a-sdk is imported: before the imports below, so before the gateway's
# Settings exist; its tracing group is read here for that alone). With tracing on they
# stay.
if not tracing_settings(TracingSettings()).exporters:
    os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

from gateway_a2a.app import create_app
from gateway_a2a.settings import Settings

__all__ = ["Settings", "create_app"]
