"""One memory service per test module and SQL backend, its tests apart by tenant.

Every record of the memory service belongs to a tenant, so tests that need no fresh
database share one service (a fresh app per test costs more than most tests: migrations,
FastAPI building its routes on the first requests) and each acts as tenants of its own.

Import :func:`shared_memory_app` into a ``conftest.py`` (pytest finds a fixture by its
name there); the module's tests run in the module's event loop
(``pytestmark = pytest.mark.asyncio(loop_scope="module")``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from asgi_lifespan import LifespanManager

from memory_service import create_app
from testsupport.postgres import create_schema, drop_schema
from testsupport.services import SQL_BACKENDS, memory_settings


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=SQL_BACKENDS)
async def shared_memory_app(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Any]:
    """The module's memory service (lifespan running) on SQLite, and on PostgreSQL (a
    schema of its own, dropped after) when configured."""
    tmp = tmp_path_factory.mktemp("shared-memory")
    database: str | None = None
    role: str | None = None
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/memory.db"
    else:
        database = request.getfixturevalue("postgres_test_database")
        role, url = await create_schema(database)
    try:
        async with LifespanManager(create_app(memory_settings(url, tmp))) as manager:
            yield manager.app
    finally:
        if database is not None and role is not None:
            await drop_schema(database, role)
