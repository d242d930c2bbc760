"""Prometheus metrics every service serves on ``GET /metrics`` (``prometheus-client``).

Each app owns one :class:`ServiceMetrics` (its own ``CollectorRegistry``, so apps built
side by side in one process, as tests do, never share counters). It holds:

- ``soorma_http_request_duration_seconds{method, route, status}``: every request's
  latency, observed by :class:`RequestMetricsMiddleware` in servicekit's middleware
  stack (so fast-path requests count too). ``route`` is the route *template*
  (``/v1/memory/plan-context/{plan_id}``), never the raw path; requests no route matched
  count as ``unmatched``. Its ``_count`` is the request rate.
- ``soorma_storage_operation_duration_seconds{operation}``: store calls, through
  :meth:`ServiceMetrics.timed_store` (a proxy timing each coroutine method) or
  :meth:`ServiceMetrics.time_engine` (SQL statements of an SQLAlchemy engine, by verb).
- whatever a service registers on :attr:`ServiceMetrics.registry` (event-service and
  gateway counters and gauges), and gauges it refreshes at scrape time with
  :meth:`ServiceMetrics.on_scrape` (an async callback, run at most once per
  ``metrics_cache_seconds``, with a time limit; never on the request path).

Cardinality is bounded: labels are methods, route templates, statuses, operation names
and other fixed sets; no ids and no tenants, unless ``SOORMA_METRICS_TENANT_LABEL=true``
(then services that support it add a ``tenant`` label; that setting requires
``SOORMA_METRICS_TOKEN``, so per-tenant figures are never open to anyone who asks).

Who may read ``/metrics``: without ``SOORMA_METRICS_TOKEN`` it is open on the service
port, as Prometheus expects (it carries no tenant data then); with it, the scraper must
send ``Authorization: Bearer <token>``. ``SOORMA_METRICS_ENABLED=false`` removes the
endpoint and the request middleware.

(Over 400 lines: the request middleware, the lock-free hot-path counters and the
scrape-time exposition are one mechanism; each part is small.)
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterator, Sequence
from itertools import accumulate
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servicekit.errors import error_response
from servicekit.settings import MetricsSettings

log = logging.getLogger("servicekit.metrics")

# No ``*_created`` series (a timestamp per counter child): Prometheus does not need them
# and they double the output. Process-wide, like the library's switch.
disable_created_metrics()  # type: ignore[no-untyped-call]

METRICS_PATH = "/metrics"
# A fast path that answers a route itself puts the route's template here (FastAPI's
# routing leaves the matched route in ``scope["route"]`` instead).
ROUTE_TEMPLATE = "servicekit.route_template"
UNMATCHED = "unmatched"
# Where servicekit's request-context middleware notes the response status it saw go out:
# middleware inside it read it here instead of wrapping ``send`` again.
RESPONSE_STATUS = "servicekit.response_status"
_STARTED = "servicekit.metrics.started"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Seconds; from a cached read (~1 ms) to a long poll or a stream's whole life.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
REFRESH_TIMEOUT_SECONDS = 5.0

ScrapeCallback = Callable[[], Awaitable[None]]


class _Cell:
    """One counter series: a plain number (the event loop is the only writer)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class _Buckets:
    """One histogram series: per-bucket counts (not cumulative) and the sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value


class FastCounter:
    """A labelled counter for the request path, without prometheus-client's locks.

    prometheus-client guards every increment with a lock (threads); a service's request
    path runs on one event loop, so a plain number per series is enough and costs a
    fraction (a lookup and an addition). :meth:`labels` returns the series; keep it.
    Exposed on the registry like any counter (``<name>_total``).
    """

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._series: dict[tuple[str, ...], _Cell] = {}
        if not self.labelnames:
            self._series[()] = _Cell()
        registry.register(self)

    def labels(self, *values: str) -> _Cell:
        cell = self._series.get(values)
        if cell is None:
            cell = self._series[values] = _Cell()
        return cell

    def inc(self, amount: float = 1) -> None:
        self._series[()].inc(amount)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, cell in list(self._series.items()):
            family.add_metric(list(values), cell.value)
        yield family


class FastHistogram:
    """A labelled histogram for the request path (see :class:`FastCounter`)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry,
        buckets: tuple[float, ...] = LATENCY_BUCKETS,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.buckets = tuple(buckets)
        self._series: dict[tuple[str, ...], _Buckets] = {}
        registry.register(self)

    def labels(self, *values: str) -> _Buckets:
        series = self._series.get(values)
        if series is None:
            series = self._series[values] = _Buckets(self.buckets)
        return series

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        bounds = [*(floatToGoString(b) for b in self.buckets), "+Inf"]  # type: ignore[no-untyped-call]
        for values, series in list(self._series.items()):
            cumulative = list(accumulate(series.counts))
            family.add_metric(
                list(values), list(zip(bounds, cumulative, strict=True)), series.total
            )
        yield family


class ServiceMetrics:
    """One service's Prometheus registry, request histogram and scrape-time refreshers."""

    def __init__(self, service: str, settings: MetricsSettings) -> None:
        self.service = service
        self.settings = settings
        self.tenant_label = settings.metrics_tenant_label
        self.registry = CollectorRegistry(auto_describe=True)
        Gauge(
            "soorma_service_info",
            "Always 1; the service's name as a label (join on it in queries).",
            ("service",),
            registry=self.registry,
        ).labels(service).set(1)
        self._requests = FastHistogram(
            "soorma_http_request_duration_seconds",
            "HTTP requests by method, route template and status; _count is the request rate.",
            ("method", "route", "status"),
            self.registry,
        )
        self._request_children: dict[tuple[str, str, int], _Buckets] = {}
        self._storage: FastHistogram | None = None
        self._storage_children: dict[str, _Buckets] = {}
        self._refresh_errors = Counter(
            "soorma_metrics_refresh_errors_total",
            "Scrape-time gauge refreshes that failed or timed out (the gauges kept old values).",
            registry=self.registry,
        )
        self._callbacks: list[ScrapeCallback] = []
        self._refreshed_at = float("-inf")
        self._refresh_lock = asyncio.Lock()

    # -- requests -----------------------------------------------------------------

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        child = self._request_children.get(key)
        if child is None:
            label = method if method in _METHODS else "OTHER"
            child = self._requests.labels(label, route, str(status))
            self._request_children[key] = child
        child.observe(seconds)

    # -- storage ------------------------------------------------------------------

    def storage_timer(self, operation: str) -> _Buckets:
        """The histogram series for one storage ``operation`` (``.observe(seconds)``)."""
        child = self._storage_children.get(operation)
        if child is None:
            if self._storage is None:
                self._storage = FastHistogram(
                    "soorma_storage_operation_duration_seconds",
                    "Storage calls by operation (store method, or SQL verb), in seconds.",
                    ("operation",),
                    self.registry,
                )
            child = self._storage_children[operation] = self._storage.labels(operation)
        return child

    def timed_store(self, store: Any) -> Any:
        """``store`` with every coroutine method timed under its own name."""
        return TimedStore(store, self)

    def time_engine(self, engine: Any) -> None:
        """Time every SQL statement of an SQLAlchemy (async) engine, labelled by verb."""
        from sqlalchemy import event

        sync = getattr(engine, "sync_engine", engine)

        # A connection runs one statement at a time: one start time per connection (a
        # failed statement's is simply overwritten by the next one's).
        @event.listens_for(sync, "before_cursor_execute")
        def _start(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
            conn.info[_STARTED] = time.perf_counter()

        @event.listens_for(sync, "after_cursor_execute")
        def _stop(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
            started = conn.info.pop(_STARTED, None)
            if started is not None:
                self.storage_timer(_verb(statement)).observe(time.perf_counter() - started)

    # -- scraping -----------------------------------------------------------------

    def on_scrape(self, callback: ScrapeCallback) -> None:
        """Run ``callback`` before a scrape (at most once per ``metrics_cache_seconds``)."""
        self._callbacks.append(callback)

    def clear_scrape_callbacks(self) -> None:
        self._callbacks.clear()

    async def refresh(self) -> None:
        """Run the scrape callbacks unless they ran within ``metrics_cache_seconds``."""
        async with self._refresh_lock:
            now = time.monotonic()
            if now - self._refreshed_at < self.settings.metrics_cache_seconds:
                return
            self._refreshed_at = now
            for callback in list(self._callbacks):
                try:
                    async with asyncio.timeout(REFRESH_TIMEOUT_SECONDS):
                        await callback()
                except Exception as exc:  # a scrape must answer: keep the old values
                    self._refresh_errors.inc()
                    log.warning("metrics refresh failed: %s", exc)

    async def render(self) -> bytes:
        await self.refresh()
        return generate_latest(self.registry)


class TimedStore:
    """A proxy timing each coroutine method of ``store`` (other attributes pass through).

    Wrapped methods are cached on the proxy, so a call costs one attribute lookup, two
    clock reads and one histogram observation more than the bare call.
    """

    def __init__(self, store: Any, metrics: ServiceMetrics) -> None:
        self._store = store
        self._metrics = metrics

    @property
    def wrapped(self) -> Any:
        return self._store

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not asyncio.iscoroutinefunction(value):
            return value
        timer = self._metrics.storage_timer(name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await value(*args, **kwargs)
            finally:
                timer.observe(time.perf_counter() - started)

        self.__dict__[name] = timed
        return timed


def _verb(statement: str) -> str:
    head = statement.lstrip()[:10].split(None, 1)
    verb = head[0].upper() if head else ""
    return verb if verb in _SQL_VERBS else "OTHER"


_SQL_VERBS = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "BEGIN", "COMMIT"})


def route_of(scope: Scope) -> str:
    """The route template a request was answered by (``unmatched`` when none)."""
    template = scope.get(ROUTE_TEMPLATE)
    if template is not None:
        return str(template)
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class RequestMetricsMiddleware:
    """Pure ASGI: answers ``GET /metrics`` and times every other HTTP request.

    Part of servicekit's middleware stack (inside the request context, outside the
    service's own middleware), so ``/metrics`` has its own access rule (the token) and
    not the service's (e.g. the gateway's API-key check).
    """

    def __init__(
        self, app: ASGIApp, *, metrics: ServiceMetrics, status_noted: bool = False
    ) -> None:
        self.app = app
        self.metrics = metrics
        # True when an outer middleware (servicekit's request context) records the
        # response status in the scope: then ``send`` is not wrapped a second time.
        self.status_noted = status_noted
        token = metrics.settings.metrics_token
        self._token = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == METRICS_PATH and scope["method"] in ("GET", "HEAD"):
            await self._serve(scope, receive, send)
            return
        started = time.perf_counter()
        if self.status_noted:
            try:
                await self.app(scope, receive, send)
            finally:
                self.metrics.observe_request(
                    scope["method"],
                    route_of(scope),
                    scope.get(RESPONSE_STATUS, 500),
                    time.perf_counter() - started,
                )
            return
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.observe_request(
                scope["method"], route_of(scope), status, time.perf_counter() - started
            )

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._token is not None:
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            if not hmac.compare_digest(given, self._token):
                response = error_response(
                    401, "unauthenticated", "GET /metrics needs 'Authorization: Bearer <token>'"
                )
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
        body = await self.metrics.render()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", CONTENT_TYPE_LATEST.encode()),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send(
            {"type": "http.response.body", "body": body if scope["method"] == "GET" else b""}
        )


__all__ = [
    "LATENCY_BUCKETS",
    "METRICS_PATH",
    "RESPONSE_STATUS",
    "ROUTE_TEMPLATE",
    "FastCounter",
    "FastHistogram",
    "RequestMetricsMiddleware",
    "ServiceMetrics",
    "TimedStore",
    "route_of",
]
