"""Spans collected in memory: tracing on for one test, through the SDK's own switch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from soorma_common import tracing as otel


class Spans:
    """The finished spans of one test, with the look-ups the assertions need."""

    def __init__(self, provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
        self.provider = provider
        self.exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {self.names()}"
        return found[0]

    def names(self) -> list[str]:
        return sorted(s.name for s in self.all())

    def in_trace(self, trace_id: int) -> list[ReadableSpan]:
        return [s for s in self.all() if s.context.trace_id == trace_id]


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def spans(provider: tuple[TracerProvider, InMemorySpanExporter]) -> Iterator[Spans]:
    """Tracing on (to an in-memory exporter) for the test; off again afterwards."""
    otel.enable(provider[0])
    try:
        yield Spans(*provider)
    finally:
        otel.disable()
