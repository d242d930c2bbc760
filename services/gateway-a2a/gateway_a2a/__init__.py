"""A2A protocol gateway for external clients."""

import os

# a2a-sdk wraps every handler call in an OpenTelemetry span; the gateway configures no
# tracer, so the spans go nowhere and cost CPU per request. An operator who traces the
# SDK sets OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=true (read when a2a-sdk is imported).
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

from gateway_a2a.app import create_app

__all__ = ["create_app"]
