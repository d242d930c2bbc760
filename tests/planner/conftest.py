"""Planner fixtures: event + memory + registry services under uvicorn.

``embedded`` = in-memory event log + SQLite; ``real`` = Redis Streams + PostgreSQL (when
their URLs are set; CI always runs it).

``platform`` starts the services for each test. A module whose tests only need their
own tenant (plans, tasks, streams and consumer groups are the tenant's) uses
``tenant_platform`` instead: the services are started once for the module, each test
acts as a tenant of its own, and the module's tests share its event loop
(``pytest.mark.asyncio(loop_scope="module")``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from planner_support import Platform

import memory_service
import registry_service
from event_service import create_app as create_event_app
from testsupport.databases import fresh_postgres, redis_key_space
from testsupport.server import serve
from testsupport.services import (
    event_settings,
    memory_settings,
    redis_event_settings,
    registry_settings,
)


@pytest.fixture(
    params=["embedded", pytest.param("real", marks=[pytest.mark.redis, pytest.mark.postgres])]
)
def backend(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "embedded":
        return {"events": event_settings(), "db": request.getfixturevalue("sqlite_url")}
    return {
        "events": redis_event_settings(
            request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
        ),
        "db": request.getfixturevalue("postgres_url"),
    }


@pytest_asyncio.fixture
async def platform(backend: dict[str, Any], tmp_path: Any) -> AsyncIterator[Platform]:
    db = backend["db"]
    # The registry keeps its own SQLite file: its Postgres path is covered by
    # tests/registry_client, and two services migrating one database would collide.
    registry_db = f"sqlite+aiosqlite:///{tmp_path}/registry.db"
    async with (
        serve(create_event_app(backend["events"])) as events,
        serve(memory_service.create_app(memory_settings(db, tmp_path))) as memory,
        serve(registry_service.create_app(registry_settings(registry_db, tmp_path))) as registry,
    ):
        platform = Platform(events=events.url, memory=memory.url, registry=registry.url)
        try:
            yield platform
        finally:
            await platform.close()


@contextlib.asynccontextmanager
async def _services(events: Any, db: str, data_dir: Any) -> AsyncIterator[Platform]:
    registry_db = f"sqlite+aiosqlite:///{data_dir}/registry.db"
    async with (
        serve(create_event_app(events)) as event_server,
        serve(memory_service.create_app(memory_settings(db, data_dir))) as memory,
        serve(registry_service.create_app(registry_settings(registry_db, data_dir))) as registry,
    ):
        yield Platform(events=event_server.url, memory=memory.url, registry=registry.url)


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=["embedded", pytest.param("real", marks=[pytest.mark.redis, pytest.mark.postgres])],
)
async def shared_services(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Platform]:
    """The three services, started once for the module, on either backend."""
    data_dir = tmp_path_factory.mktemp("planner")
    if request.param == "embedded":
        async with _services(
            event_settings(), f"sqlite+aiosqlite:///{data_dir}/test.db", data_dir
        ) as services:
            yield services
        return
    redis_url = request.getfixturevalue("redis_base_url")
    async with (
        redis_key_space(redis_url) as prefix,
        fresh_postgres(request.getfixturevalue("postgres_server_url")) as db,
        _services(redis_event_settings(redis_url, prefix), db, data_dir) as services,
    ):
        yield services


@pytest_asyncio.fixture(loop_scope="module")
async def tenant_platform(shared_services: Platform) -> AsyncIterator[Platform]:
    """The module's services, seen by this test as a tenant of its own; its agents are
    stopped and its contexts closed when it ends."""
    platform = dataclasses.replace(
        shared_services, tenant_id=f"t-{uuid.uuid4().hex[:12]}", _contexts=[], _agents=[]
    )
    try:
        yield platform
    finally:
        await platform.close()
