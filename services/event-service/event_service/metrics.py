"""The event service's Prometheus metrics (served on ``GET /metrics`` by servicekit).

Counters move where the work happens and cost one dictionary lookup and one increment
each (no I/O on the request path). Gauges read from the log (dead letters, group lag
and pending) are refreshed at scrape time by :meth:`EventMetrics.refresh`, one bounded
query (:meth:`EventLog.stats`, at most ``metrics_max_streams`` topic logs) cached for
``metrics_cache_seconds``. See docs/operations.md for what each one means.

Labels are bounded: ``topic`` is one of the standard topics or ``other``; ``group`` is
a consumer-group name (an agent's name, not an id), at most :data:`MAX_GROUP_SERIES` of
them (the rest summed as ``other``); ``mode`` is ``broadcast`` or ``group``. A
``tenant`` label is added to the publish, ack, nack and redelivery counters only with
``SOORMA_METRICS_TENANT_LABEL=true``.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, Gauge
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from event_service.backends.base import EventLog, NewEvent
from servicekit.metrics import FastCounter, ServiceMetrics
from soorma_common.events import STANDARD_TOPICS

OTHER = "other"
MAX_GROUP_SERIES = 50
STREAM_PATH = "/v1/events/stream"
# The line that starts an event delivery's SSE frame. Data is one line of JSON (never a
# raw newline), so after a newline this can only be a frame's first line, whichever line
# ending the SSE writer uses.
_FRAME_START = b"event: message"
_FRAME_AFTER_NEWLINE = b"\n" + _FRAME_START


def topic_label(topic: str) -> str:
    return topic if topic in STANDARD_TOPICS else OTHER


class EventMetrics:
    """Counters and gauges of the bus, on the app's registry (or a private one)."""

    def __init__(self, metrics: ServiceMetrics | None) -> None:
        registry = metrics.registry if metrics is not None else CollectorRegistry()
        self.tenant_label = metrics.tenant_label if metrics is not None else False
        extra = ("tenant",) if self.tenant_label else ()
        self._published = FastCounter(
            "soorma_events_published",
            "Events appended to the log (publish and publish-batch), by topic.",
            ("topic", *extra),
            registry,
        )
        self._delivered = FastCounter(
            "soorma_event_deliveries",
            "Event frames written to subscribers' SSE streams (redeliveries included).",
            ("mode",),
            registry,
        )
        self._redelivered = FastCounter(
            "soorma_event_redeliveries",
            "Group deliveries taken over after their visibility timeout, a nack, or a "
            "consumer's restart (each is also counted in soorma_event_deliveries).",
            extra,
            registry,
        )
        self._acked = FastCounter("soorma_event_acks", "Group deliveries acked.", extra, registry)
        self._nacked = FastCounter(
            "soorma_event_nacks", "Group deliveries nacked.", extra, registry
        )
        self._open = Gauge(
            "soorma_event_open_streams",
            "SSE streams open on this process, by mode.",
            ("mode",),
            registry=registry,
        )
        self._dead = Gauge(
            "soorma_event_dlq_size",
            "Dead letters waiting in T.dlq, by live topic T (all tenants).",
            ("topic",),
            registry=registry,
        )
        self._lag = Gauge(
            "soorma_event_group_lag",
            "Entries not yet delivered to a consumer group, summed over its topics and tenants.",
            ("group",),
            registry=registry,
        )
        self._pending = Gauge(
            "soorma_event_group_pending",
            "Deliveries to a consumer group not yet acked (in flight or awaiting redelivery).",
            ("group",),
            registry=registry,
        )
        self._streams_seen = Gauge(
            "soorma_event_stats_streams",
            "Topic logs the last refresh looked at.",
            registry=registry,
        )
        self._stats_complete = Gauge(
            "soorma_event_stats_complete",
            "1 when the last refresh saw every topic log, 0 when metrics_max_streams cut it.",
            registry=registry,
        )
        # Published-counter series by raw topic name (no tenant label): one lookup.
        self._by_topic: dict[str, Any] = {}

    def _tenant(self, tenant: str) -> tuple[str, ...]:
        return (tenant,) if self.tenant_label else ()

    # -- counters (request path) ------------------------------------------------------

    def published(self, tenant: str, events: Sequence[NewEvent]) -> None:
        if len(events) == 1 and not self.tenant_label:
            topic = events[0].topic
            cell = self._by_topic.get(topic)
            if cell is None:
                cell = self._by_topic[topic] = self._published.labels(topic_label(topic))
            cell.inc()
            return
        extra = self._tenant(tenant)
        for topic, count in Tally(topic_label(e.topic) for e in events).items():
            self._published.labels(topic, *extra).inc(count)

    def acked(self, tenant: str, count: int) -> None:
        if count:
            self._acked.labels(*self._tenant(tenant)).inc(count)

    def nacked(self, tenant: str, count: int) -> None:
        if count:
            self._nacked.labels(*self._tenant(tenant)).inc(count)

    def redelivered(self, tenant: str, count: int) -> None:
        if count:
            self._redelivered.labels(*self._tenant(tenant)).inc(count)

    def delivered(self, mode: str, frames: int) -> None:
        self._delivered.labels(mode).inc(frames)

    def stream_opened(self, mode: str) -> None:
        self._open.labels(mode).inc()

    def stream_closed(self, mode: str) -> None:
        self._open.labels(mode).dec()

    # -- gauges (scrape time) -----------------------------------------------------------

    async def refresh(self, log: EventLog, *, max_streams: int) -> None:
        """Read dead letters and group lag/pending from the log into the gauges."""
        stats = await log.stats(max_streams=max_streams)
        dead: Tally[str] = Tally()
        for topic, count in stats.dead_letters.items():
            dead[topic_label(topic)] += count
        _replace(self._dead, dict(dead))
        ranked = sorted(stats.groups.items(), key=lambda kv: kv[1][0] + kv[1][1], reverse=True)
        lag: dict[str, float] = {}
        pending: dict[str, float] = {}
        for i, (group, (group_lag, group_pending)) in enumerate(ranked):
            name = group if i < MAX_GROUP_SERIES else OTHER
            lag[name] = lag.get(name, 0) + group_lag
            pending[name] = pending.get(name, 0) + group_pending
        _replace(self._lag, lag)
        _replace(self._pending, pending)
        self._streams_seen.set(stats.streams)
        self._stats_complete.set(1 if stats.complete else 0)


class StreamMetricsMiddleware:
    """Counts open SSE streams and the event frames written to them, at the ASGI level.

    Independent of how the stream route builds its response (any SSE response class):
    a stream is open from its 200 response start until the ASGI call returns (which it
    does when the client goes away), and every body chunk is counted for frames.
    Requests to other paths pass straight through.
    """

    def __init__(self, app: ASGIApp, *, metrics: EventMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != STREAM_PATH:
            await self.app(scope, receive, send)
            return
        query = parse_qs(scope["query_string"].decode("latin-1"))
        mode = "group" if query.get("group") else "broadcast"
        metrics = self.metrics
        opened = False

        async def counting_send(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] == 200:
                metrics.stream_opened(mode)
                opened = True
            elif opened and message["type"] == "http.response.body":
                body = message.get("body", b"")
                frames = body.count(_FRAME_AFTER_NEWLINE) + body.startswith(_FRAME_START)
                if frames:
                    metrics.delivered(mode, frames)
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            if opened:
                metrics.stream_closed(mode)


def _replace(gauge: Gauge, values: dict[str, float]) -> None:
    """Set ``gauge`` to exactly ``values`` (series that disappeared are removed)."""
    gauge.clear()
    for label, value in values.items():
        gauge.labels(label).set(value)


__all__ = ["MAX_GROUP_SERIES", "EventMetrics", "StreamMetricsMiddleware", "topic_label"]
