"""App factory for the registry-service."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from registry_service.purge import purge_forever
from registry_service.routes import agents_router, events_router
from registry_service.settings import Settings
from registry_service.sql_store import SqlRegistryStore
from servicekit import create_service_app
from servicekit.db import database_url, make_engine, migrate

MIGRATIONS = Path(__file__).parent / "alembic"
VERSION_TABLE = "registry_alembic_version"


async def open_store(settings: Settings) -> SqlRegistryStore:
    """Connect to the registry database and bring its schema to the latest migration."""
    url = database_url(settings, "registry", settings.registry_database_url)
    engine = make_engine(url)
    try:
        await migrate(engine, MIGRATIONS, version_table=VERSION_TABLE)
    except BaseException:
        await engine.dispose()
        raise
    return SqlRegistryStore(engine=engine)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the registry-service app. Nothing connects until the lifespan starts."""
    settings = settings or Settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        store = await open_store(settings)
        sweeper = asyncio.create_task(
            purge_forever(store, interval_seconds=settings.registry_purge_interval_seconds)
        )
        try:
            # Requests get the store with each call timed (storage latency metrics).
            metrics = getattr(app, "metrics", None)
            served = metrics.timed_store(store) if metrics is not None else store
            yield {"store": served, "ready_checks": {"database": store.ping}}
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await store.close()

    return create_service_app(
        name="registry-service",
        settings=settings,
        lifespan=lifespan,
        routers=[agents_router, events_router],
    )
