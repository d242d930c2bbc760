"""Memory-service fixtures: every test runs on SQLite and, when configured, PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
import pytest_asyncio
from asgi_lifespan import LifespanManager

from memory_service import create_app
from memory_service.settings import Settings

ClientFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh database per test: SQLite always, PostgreSQL when configured."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest.fixture
def make_settings(db_url: str, tmp_path: Any) -> Callable[..., Settings]:
    def factory(**overrides: Any) -> Settings:
        # A long prune interval keeps the background pruner out of the tests' way;
        # retention is tested by calling the prune function directly.
        values: dict[str, Any] = {
            "memory_database_url": db_url,
            "data_dir": tmp_path,
            "memory_prune_interval_seconds": 3600,
            **overrides,
        }
        return Settings(**values)

    return factory


@pytest.fixture
def make_client(make_settings: Callable[..., Settings]) -> ClientFactory:
    """Start a memory-service app (settings overridable) and give an in-process client."""

    @asynccontextmanager
    async def factory(**overrides: Any) -> AsyncIterator[httpx.AsyncClient]:
        app = create_app(make_settings(**overrides))
        async with LifespanManager(app) as manager, httpx.AsyncClient(
            transport=httpx.ASGITransport(manager.app), base_url="http://memory"
        ) as client:
            yield client

    return factory


@pytest_asyncio.fixture
async def client(make_client: ClientFactory) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client() as c:
        yield c
