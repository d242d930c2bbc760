"""App factory for the event-service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.responses import Response

from event_service.backends.base import EventLog
from event_service.backends.memory import MemoryEventLog
from event_service.fanout import BroadcastHub
from event_service.fastpath import PublishFastPath
from event_service.groups import GroupWaker, finish_cleanups
from event_service.metrics import EventMetrics, StreamMetricsMiddleware
from event_service.routes import router
from event_service.settings import Settings
from event_service.state import EventState
from servicekit import create_service_app
from servicekit.errors import error_response
from soorma_common.clock import SYSTEM_CLOCK, Clock


def create_app(
    settings: Settings | None = None,
    *,
    fast_path: PublishFastPath | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> FastAPI:
    """Build the event-service app. Nothing connects until the lifespan starts.

    Args:
        settings: Service settings (from the environment when omitted).
        fast_path: The publish fast path to use when ``settings.publish_fast_path`` is on
            (``SOORMA_PUBLISH_FAST_PATH``, the switch; default: a new
            :class:`PublishFastPath`). Off, every request goes to FastAPI's routes.
        clock: Time for the in-memory log (ids, delivery leases, blocking reads) and its
            group streams (redelivery checks, prefetch waits): a test passes a
            ``ManualClock`` and lets leases run out without waiting. On Redis it is not
            used: Redis measures idle times on its own clock, so the group streams
            there keep real time.
    """
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        clients: list[Any] = []
        log: EventLog
        if settings.event_backend == "redis":
            from event_service.backends.redis import RedisEventLog, open_redis

            client, blocking = open_redis(settings)
            clients = [client, blocking]
            log = RedisEventLog(
                redis=client,
                blocking_redis=blocking,
                prefix=settings.redis_prefix,
                max_length=settings.stream_max_length,
                command_timeout=settings.redis_command_timeout,
                tap_topics=settings.tap_topics,
                direct=settings.redis_direct,
            )
        else:
            log = MemoryEventLog(
                max_length=settings.stream_max_length,
                tap_topics=settings.tap_topics,
                clock=clock,
            )
        state = EventState(
            log=log,
            hub=BroadcastHub(log=log, batch=settings.read_batch, block=settings.block_seconds),
            waker=GroupWaker(),
            settings=settings,
            metrics=metrics,
            clock=clock if isinstance(log, MemoryEventLog) else SYSTEM_CLOCK,
        )
        hub = state.hub
        if app.metrics is not None:

            async def refresh() -> None:
                await metrics.refresh(log, max_streams=settings.metrics_max_streams)

            app.metrics.on_scrape(refresh)
        try:
            yield {"events": state, "ready_checks": {"event_log": log.ping}}
        finally:
            await finish_cleanups()
            await hub.close()
            await log.close()
            for client in clients:
                await client.aclose()
            if app.metrics is not None:
                app.metrics.clear_scrape_callbacks()

    if not settings.publish_fast_path:
        fast_path = None
    elif fast_path is None:
        fast_path = PublishFastPath(settings=settings)
    app = create_service_app(
        name="event-service",
        settings=settings,
        lifespan=lifespan,
        routers=[router],
        max_body_bytes=settings.max_request_bytes,
        fast_path=fast_path,
    )
    metrics = EventMetrics(app.metrics)
    app.add_middleware(StreamMetricsMiddleware, metrics=metrics)
    # Redis unreachable is the caller's cue to retry, not a bug: 503, not 500.
    app.add_exception_handler(RedisConnectionError, _backend_unavailable)
    app.add_exception_handler(RedisTimeoutError, _backend_unavailable)
    return app


async def _backend_unavailable(_: Request, exc: Exception) -> Response:
    return error_response(503, "service_unavailable", f"event log unavailable: {exc}")
