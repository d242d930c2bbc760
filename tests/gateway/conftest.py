"""Gateway fixtures: the event service, the registry and the gateway under real uvicorn
(testsupport.gateway_platform).

The gateway's database is SQLite always and PostgreSQL when configured (``db_url``);
the event service runs in-process (``platform``) or on Redis (``redis_platform``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from event_service import create_app as create_event_app
from testsupport.gateway_platform import Platform, open_platform
from testsupport.services import (
    db_url,
    event_settings,
    redis_event_settings,
)

__all__ = ["db_url"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def platform(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Platform]:
    """Gateway on SQLite, event service in-process, echo and review agents of tenant-a.

    Shared by the tests of a module (they use their own documents and context ids).
    """
    tmp_path = tmp_path_factory.mktemp("gateway")
    sqlite_url = f"sqlite+aiosqlite:///{tmp_path}/test.db"
    async with open_platform(
        create_event_app(event_settings(block_seconds=0.5)),
        sqlite_url,
        sqlite_url.replace("test.db", "gw.db"),
        tmp_path,
    ) as p:
        yield p


@pytest_asyncio.fixture
async def db_platform(db_url: str, sqlite_url: str, tmp_path: Any) -> AsyncIterator[Platform]:
    """As ``platform``, with the gateway on SQLite and (when configured) PostgreSQL."""
    gateway_db = db_url if db_url.startswith("postgresql") else db_url.replace("test.db", "gw.db")
    async with open_platform(
        create_event_app(event_settings(block_seconds=0.5)), sqlite_url, gateway_db, tmp_path
    ) as p:
        yield p


@pytest_asyncio.fixture
async def pg_platform(postgres_url: str, sqlite_url: str, tmp_path: Any) -> AsyncIterator[Platform]:
    """As ``db_platform``, with the gateway on PostgreSQL only (for tests that start a
    process per replica: slow, so run once, on the database replicas share in production)."""
    app = create_event_app(event_settings(block_seconds=0.5))
    async with open_platform(app, sqlite_url, postgres_url, tmp_path) as p:
        yield p


@pytest_asyncio.fixture
async def redis_platform(
    redis_url: str, redis_prefix: str, postgres_url: str, sqlite_url: str, tmp_path: Any
) -> AsyncIterator[Platform]:
    """Event service on Redis Streams, gateway on PostgreSQL."""
    app = create_event_app(redis_event_settings(redis_url, redis_prefix))
    async with open_platform(app, sqlite_url, postgres_url, tmp_path) as p:
        yield p
