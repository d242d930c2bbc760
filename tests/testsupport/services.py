"""Start the platform's services for a test, on the backends the test runs against.

- :func:`db_url`: a fixture parametrized over the SQL backends (SQLite always, PostgreSQL
  when ``SOORMA_TEST_DATABASE_URL`` is set); import it into a ``conftest.py`` to use it.
- ``*_settings``: each service's settings for a test, with its background housekeeping
  out of the way (tests of that housekeeping pass their own interval);
  :func:`redis_event_settings` puts the event service on Redis.
- :func:`in_process`: an ``httpx`` client on an app running in-process, lifespan included.

Serve an app under real uvicorn with :func:`testsupport.server.serve`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from event_service.settings import Settings as EventSettings
from memory_service.settings import Settings as MemorySettings
from registry_service.settings import Settings as RegistrySettings

SQL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

# Background pruning/purging runs at start-up and then hourly: never again during a test.
QUIET_INTERVAL_SECONDS = 3600


@pytest.fixture(params=SQL_BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh database per test: SQLite always, PostgreSQL when configured."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(name)
    return url


def memory_settings(database_url: str, data_dir: Any, **overrides: Any) -> MemorySettings:
    """Memory-service settings on ``database_url`` (``overrides`` win)."""
    values: dict[str, Any] = {
        "memory_database_url": database_url,
        "data_dir": data_dir,
        "memory_prune_interval_seconds": QUIET_INTERVAL_SECONDS,
        **overrides,
    }
    return MemorySettings(**values)


def registry_settings(database_url: str, data_dir: Any, **overrides: Any) -> RegistrySettings:
    """Registry-service settings on ``database_url`` (``overrides`` win)."""
    values: dict[str, Any] = {
        "registry_database_url": database_url,
        "data_dir": data_dir,
        "registry_purge_interval_seconds": QUIET_INTERVAL_SECONDS,
        **overrides,
    }
    return RegistrySettings(**values)


def event_settings(**overrides: Any) -> EventSettings:
    """Event-service settings on its in-process backend, reclaiming unacked events quickly."""
    values: dict[str, Any] = {
        "event_backend": "memory",
        "claim_interval_seconds": 0.05,
        **overrides,
    }
    return EventSettings(**values)


def redis_event_settings(redis_url: str, redis_prefix: str, **overrides: Any) -> EventSettings:
    """Event-service settings on Redis Streams under ``redis_prefix`` (``overrides`` win).

    Reads block for at most half a second, so the service stops promptly after a test.
    """
    values: dict[str, Any] = {
        "event_backend": "redis",
        "redis_url": redis_url,
        "redis_prefix": redis_prefix,
        "block_seconds": 0.5,
        **overrides,
    }
    return event_settings(**values)


@asynccontextmanager
async def in_process(
    app: Any, *, base_url: str = "http://testserver", **client_options: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """``async with in_process(app) as client``: the app's lifespan runs around the client.

    ``ASGITransport`` alone runs no lifespan (nothing would be connected) and buffers whole
    responses, so streams (SSE) need :func:`testsupport.server.serve` instead.
    """
    async with (
        LifespanManager(app) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(manager.app), base_url=base_url, **client_options
        ) as client,
    ):
        yield client
