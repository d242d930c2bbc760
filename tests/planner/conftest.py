"""Planner fixtures: event + memory + registry services under uvicorn.

``embedded`` = in-memory event log + SQLite; ``real`` = Redis Streams + PostgreSQL (when
their URLs are set; CI always runs it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from planner_support import Platform

import memory_service
import registry_service
from event_service import create_app as create_event_app
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
