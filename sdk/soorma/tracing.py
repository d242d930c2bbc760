"""The SDK's tracing set-up, for platform services and applications (docs/tracing.md).

The spans themselves are emitted inside the SDK (``soorma._tracing``); this module is the
public part other packages may rely on: turning tracing on from ``OTEL_*``, whether it is
on, the tracer, and reading a W3C trace context.
"""

from __future__ import annotations

from soorma import _tracing
from soorma._tracing import configure, exporter_names, extract, tracer

__all__ = ["configure", "enabled", "exporter_names", "extract", "tracer"]


def enabled() -> bool:
    """Whether tracing is on in this process (read per call: it can be turned on later)."""
    return _tracing.ENABLED
