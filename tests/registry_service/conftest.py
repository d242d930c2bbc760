"""Registry-service fixtures: the same tests run on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest
import pytest_asyncio
from registry_support import FakeClock

from registry_service import SqlRegistryStore, create_app
from registry_service.app import MIGRATIONS, VERSION_TABLE
from servicekit.db import make_engine, migrate
from testsupport.services import db_url, in_process, registry_settings

__all__ = ["db_url"]  # a fixture: pytest finds it by its name in this module

ClientFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def make_client(db_url: str, tmp_path: Any) -> ClientFactory:
    """Start a registry app on ``db_url`` (settings overridable) and give a client for it."""

    def factory(**overrides: Any) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        app = create_app(registry_settings(db_url, tmp_path, **overrides))
        return in_process(app, base_url="http://registry")

    return factory


@pytest_asyncio.fixture
async def client(make_client: ClientFactory) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client() as c:
        yield c


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest_asyncio.fixture
async def store(db_url: str, clock: FakeClock) -> AsyncIterator[SqlRegistryStore]:
    """The SQL store on a migrated database, with time under the test's control."""
    engine = make_engine(db_url)
    await migrate(engine, MIGRATIONS, version_table=VERSION_TABLE)
    s = SqlRegistryStore(engine=engine, clock=clock)
    yield s
    await s.close()
