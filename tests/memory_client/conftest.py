"""MemoryClient fixtures: the real memory service in-process, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import pytest_asyncio
from asgi_lifespan import LifespanManager

from memory_service import create_app
from memory_service.settings import Settings
from soorma import Identity
from soorma.memory import MemoryClient

MemoryFactory = Callable[..., MemoryClient]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh database per test: SQLite always, PostgreSQL when configured."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest_asyncio.fixture
async def memory_http(db_url: str, tmp_path: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client wired to a live memory-service app (lifespan and migrations run)."""
    app = create_app(
        Settings(memory_database_url=db_url, data_dir=tmp_path, memory_prune_interval_seconds=3600)
    )
    async with LifespanManager(app) as manager, httpx.AsyncClient(
        transport=httpx.ASGITransport(manager.app)
    ) as http:
        yield http


@pytest.fixture
def make_memory(memory_http: httpx.AsyncClient) -> MemoryFactory:
    """``make_memory(tenant="acme")``: a MemoryClient acting as that tenant."""

    def factory(tenant: str = "tenant-a", user: str = "user-1") -> MemoryClient:
        return MemoryClient(
            base_url="http://memory", http=memory_http,
            identity=Identity(tenant_id=tenant, user_id=user),
        )

    return factory


@pytest.fixture
def memory(make_memory: MemoryFactory) -> MemoryClient:
    return make_memory()
