"""Worker fixtures: the real event service and memory service under uvicorn.

The memory service runs on SQLite always and on PostgreSQL when configured; the event
service uses its in-process backend (the bus's own backends are tested elsewhere).

``context`` starts both services for each test. A module whose tests only need their own
tenant (tasks, recorded answers, streams and consumer groups are the tenant's) uses
``tenant_context`` (and ``shared_memory_service``) instead: the services run once for
the module, each test acts as a tenant of its own, and the module's tests share its
event loop (``pytest.mark.asyncio(loop_scope="module")``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from soorma import PlatformContext, PlatformSettings
from testsupport.databases import fresh_postgres
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


def platform(
    event_service: LiveServer, memory_service: LiveServer, *, tenant_id: str | None = None
) -> PlatformContext:
    """A context for the two services (reconnects quickly)."""
    context = PlatformContext.from_env(
        settings=PlatformSettings(
            event_service_url=event_service.url, memory_url=memory_service.url, tenant_id=tenant_id
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


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_event_service() -> AsyncIterator[LiveServer]:
    async with serve(create_event_app(event_settings(block_seconds=0.5))) as server:
        yield server


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
async def shared_memory_service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    """The memory service on SQLite and (when configured) PostgreSQL, for the module."""
    data_dir = tmp_path_factory.mktemp("worker")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{data_dir}/test.db"
        async with serve(create_memory_app(memory_settings(url, data_dir))) as server:
            yield server
        return
    async with (
        fresh_postgres(request.getfixturevalue("postgres_server_url")) as url,
        serve(create_memory_app(memory_settings(url, data_dir))) as server,
    ):
        yield server


@pytest_asyncio.fixture(loop_scope="module")
async def tenant_context(
    shared_event_service: LiveServer, shared_memory_service: LiveServer
) -> AsyncIterator[PlatformContext]:
    """A context on the module's services, acting as a tenant of its own."""
    context = platform(
        shared_event_service, shared_memory_service, tenant_id=f"t-{uuid.uuid4().hex[:12]}"
    )
    async with context:
        yield context
