"""Worker fixtures: the real event service and memory service under uvicorn.

The memory service runs on SQLite always and on PostgreSQL when configured; the event
service uses its in-process backend (the bus's own backends are tested elsewhere).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from soorma import PlatformContext, PlatformSettings
from testsupport.server import LiveServer, serve
from testsupport.services import db_url, event_settings, memory_settings

__all__ = ["db_url"]  # a fixture: pytest finds it by its name in this module


@pytest_asyncio.fixture
async def event_service() -> AsyncIterator[LiveServer]:
    async with serve(create_event_app(event_settings(block_seconds=0.5))) as server:
        yield server


@pytest_asyncio.fixture
async def memory_service(db_url: str, tmp_path: Any) -> AsyncIterator[LiveServer]:
    """The memory service on SQLite and (when configured) PostgreSQL."""
    async with serve(create_memory_app(memory_settings(db_url, tmp_path))) as server:
        yield server


@pytest_asyncio.fixture
async def sqlite_memory_service(sqlite_url: str, tmp_path: Any) -> AsyncIterator[LiveServer]:
    """The memory service on SQLite only (for tests whose subject is not the database)."""
    async with serve(create_memory_app(memory_settings(sqlite_url, tmp_path))) as server:
        yield server


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
