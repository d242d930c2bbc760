"""Worker fixtures: the real event service and memory service under uvicorn.

The memory service runs on SQLite always and on PostgreSQL when configured; the event
service uses its in-process backend (the bus's own backends are tested elsewhere).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from event_service import create_app as create_event_app
from event_service.settings import Settings as EventSettings
from memory_service import create_app as create_memory_app
from memory_service.settings import Settings as MemorySettings
from soorma import PlatformContext, PlatformSettings
from testsupport.server import LiveServer, serve


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest_asyncio.fixture
async def event_service() -> AsyncIterator[LiveServer]:
    settings = EventSettings(
        event_backend="memory", claim_interval_seconds=0.05, block_seconds=0.5
    )
    async with serve(create_event_app(settings)) as server:
        yield server


async def _memory_server(url: str, data_dir: Any) -> LiveServer:
    settings = MemorySettings(
        memory_database_url=url, data_dir=data_dir, memory_prune_interval_seconds=3600
    )
    server = LiveServer(create_memory_app(settings))
    await server.start()
    return server


@pytest_asyncio.fixture
async def memory_service(db_url: str, tmp_path: Any) -> AsyncIterator[LiveServer]:
    """The memory service on SQLite and (when configured) PostgreSQL."""
    server = await _memory_server(db_url, tmp_path)
    try:
        yield server
    finally:
        await server.stop()


@pytest_asyncio.fixture
async def sqlite_memory_service(sqlite_url: str, tmp_path: Any) -> AsyncIterator[LiveServer]:
    """The memory service on SQLite only (for tests whose subject is not the database)."""
    server = await _memory_server(sqlite_url, tmp_path)
    try:
        yield server
    finally:
        await server.stop()


def platform(event_service: LiveServer, memory_service: LiveServer) -> PlatformContext:
    """A context for the two services (reconnects quickly)."""
    context = PlatformContext.from_env(
        settings=PlatformSettings(
            event_service_url=event_service.url, memory_url=memory_service.url
        )
    )
    context.bus.max_backoff = 0.3
    return context


@pytest_asyncio.fixture
async def context(
    event_service: LiveServer, memory_service: LiveServer
) -> AsyncIterator[PlatformContext]:
    async with platform(event_service, memory_service) as ctx:
        yield ctx


@pytest_asyncio.fixture
async def light_context(
    event_service: LiveServer, sqlite_memory_service: LiveServer
) -> AsyncIterator[PlatformContext]:
    async with platform(event_service, sqlite_memory_service) as ctx:
        yield ctx
