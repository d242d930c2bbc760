"""Fixtures: the event, memory and tracker services on real backends, under uvicorn.

``stack`` runs on SQLite + the in-process event log, and on PostgreSQL + Redis Streams when
their URLs are set (``pytest -m "postgres or redis"`` selects the latter).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from tracker_stack import Stack, start_stack


@pytest.fixture(
    params=[
        "sqlite-memory",
        pytest.param("postgres-redis", marks=[pytest.mark.postgres, pytest.mark.redis]),
    ]
)
def backends(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "sqlite-memory":
        return {"db": request.getfixturevalue("sqlite_url"), "events": "memory"}
    return {
        "db": request.getfixturevalue("postgres_url"),
        "events": "redis",
        "redis_url": request.getfixturevalue("redis_url"),
        "redis_prefix": request.getfixturevalue("redis_prefix"),
    }


@pytest_asyncio.fixture
async def stack(backends: dict[str, str], tmp_path: object) -> AsyncIterator[Stack]:
    async with start_stack(backends, tmp_path) as running:
        yield running
