"""Registry-service fixtures: the same tests run on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
import pytest_asyncio
from asgi_lifespan import LifespanManager
from registry_support import FakeClock

from registry_service import Settings, SqlRegistryStore, create_app
from registry_service.app import MIGRATIONS, VERSION_TABLE
from servicekit.db import make_engine, migrate

ClientFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh database per test: SQLite always, PostgreSQL when configured."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest.fixture
def make_client(db_url: str, tmp_path: Any) -> ClientFactory:
    """Start a registry app on ``db_url`` (settings overridable) and give a client for it."""

    @asynccontextmanager
    async def factory(**overrides: Any) -> AsyncIterator[httpx.AsyncClient]:
        settings = Settings(
            registry_database_url=db_url, data_dir=tmp_path, **overrides
        )
        app = create_app(settings)
        async with LifespanManager(app) as manager, httpx.AsyncClient(
            transport=httpx.ASGITransport(manager.app), base_url="http://registry"
        ) as client:
            yield client

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
