"""App factory for the tracker-service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import APIRouter, FastAPI

from servicekit import create_service_app
from servicekit.db import database_url
from soorma import MemoryClient
from soorma.bus import BusClient
from soorma.client import Identity, verified_tls
from soorma.consumer_identity import ConsumerIdentity
from soorma.registry import RegistryClient
from soorma.settings import PlatformSettings
from soorma_common.clock import SYSTEM_CLOCK, Clock
from tracker_service.agents import router as agents_router
from tracker_service.db import open_engine
from tracker_service.projector import GROUP, Projector
from tracker_service.routes import router
from tracker_service.settings import ReplicaSettings, Settings
from tracker_service.state import TrackerState
from tracker_service.timeouts import run_timeouts
from tracker_service.ui import router as ui_router

SERVICE_ROLE = "service"
SHUTDOWN_SECONDS = 2.0


def replica_settings(settings: ReplicaSettings) -> PlatformSettings:
    """The replica variables the tracker's settings read, parsed as an agent's are (the
    environment is not read again)."""
    raw = {
        "SOORMA_CONSUMER_ID": settings.consumer_id,
        "SOORMA_REPLICA": settings.replica,
        "SOORMA_STATE_DIR": settings.state_dir,
        "XDG_CACHE_HOME": settings.xdg_cache_home,
    }
    return PlatformSettings.from_env({k: v for k, v in raw.items() if v is not None})


def create_app(settings: Settings | None = None, *, clock: Clock = SYSTEM_CLOCK) -> FastAPI:
    """Build the tracker-service app. Nothing connects until the lifespan starts.

    The lifespan migrates the database, then (unless switched off) starts the projector on
    the event service's tap and the timeout loop, which ``clock`` times.
    """
    settings = settings or Settings()
    routers: list[APIRouter] = [router, agents_router, ui_router]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        engine = await open_engine(database_url(settings, "tracker", settings.tracker_database_url))
        metrics = getattr(app, "metrics", None)
        if metrics is not None:
            metrics.time_engine(engine)  # storage latency by SQL verb
        http = httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=None), verify=verified_tls())
        identity = Identity(token=settings.api_token, role=SERVICE_ROLE)
        bus = BusClient(
            base_url=settings.event_service_url,
            http=http,
            identity=identity,
            source="soorma-tracker",
            coalesce=False,
        )
        memory = MemoryClient(
            base_url=settings.memory_url,
            http=http,
            identity=identity,
            timeout=5.0,
            connect_retries=0,
        )
        registry = RegistryClient(
            base_url=settings.registry_url,
            http=http,
            identity=identity,
            timeout=5.0,
            connect_retries=0,
        )
        # A stable id per replica: a restarted tracker takes back at once what its
        # previous life held, instead of waiting out the visibility timeout.
        replica = ConsumerIdentity(
            GROUP, settings.tracker_consumer, settings=replica_settings(settings)
        )
        consumer = replica.consumer_id
        projector = Projector(
            engine=engine,
            bus=bus,
            consumer=consumer,
            batch=settings.tracker_batch,
            batch_wait=settings.tracker_batch_wait_seconds,
            visibility_timeout=settings.tracker_visibility_timeout,
        )
        tasks: list[asyncio.Task[None]] = []
        if settings.tracker_projector:
            tasks.append(asyncio.create_task(projector.run(), name="tracker-projector"))
        if settings.tracker_timeouts:
            tasks.append(
                asyncio.create_task(
                    run_timeouts(
                        engine,
                        bus,
                        owner=consumer,
                        lease=settings.tracker_timeout_lease_seconds,
                        interval=settings.tracker_timeout_interval_seconds,
                        clock=clock,
                    ),
                    name="tracker-timeouts",
                )
            )
        state = TrackerState(
            engine=engine,
            settings=settings,
            memory=memory,
            projector=projector,
            bus=bus,
            registry=registry,
        )

        async def ready() -> None:
            async with engine.connect() as conn:
                await conn.exec_driver_sql("SELECT 1")

        try:
            yield {"tracker": state, "ready_checks": {"database": ready}}
        finally:
            for task in tasks:
                task.cancel()
            if tasks:  # bounded: shutdown never hangs on a stuck database call
                await asyncio.wait(tasks, timeout=SHUTDOWN_SECONDS)
            await http.aclose()
            await engine.dispose()
            replica.release()

    return create_service_app(
        name="tracker-service",
        settings=settings,
        lifespan=lifespan,
        routers=routers,
    )
