"""Registry-client fixtures: the real registry service (SQLite, and PostgreSQL when
configured) and the event service, both under uvicorn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

import event_service
import registry_service
from event_service.settings import Settings as EventSettings
from soorma import PlatformContext, PlatformSettings
from testsupport.server import LiveServer, serve


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def registry_db_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest_asyncio.fixture
async def registry(registry_db_url: str, tmp_path: Any) -> AsyncIterator[LiveServer]:
    settings = registry_service.Settings(
        registry_database_url=registry_db_url, data_dir=tmp_path,
        registry_purge_interval_seconds=3600,
    )
    async with serve(registry_service.create_app(settings)) as server:
        yield server


@pytest_asyncio.fixture
async def events() -> AsyncIterator[LiveServer]:
    settings = EventSettings(event_backend="memory", claim_interval_seconds=0.05)
    async with serve(event_service.create_app(settings)) as server:
        yield server


@pytest_asyncio.fixture
async def context(registry: LiveServer, events: LiveServer) -> AsyncIterator[PlatformContext]:
    settings = PlatformSettings(event_service_url=events.url, registry_url=registry.url)
    async with PlatformContext.from_env(settings=settings) as ctx:
        yield ctx
