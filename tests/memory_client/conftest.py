"""MemoryClient fixtures: the real memory service in-process, on SQLite and PostgreSQL.

One service per test module and backend: a fresh app per test cost more than the test
(migrations, FastAPI building its routes on the first requests). Every record of the
memory service belongs to a tenant, so tests stay apart by tenant: :func:`make_memory`
gives each test tenants of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import pytest_asyncio

from memory_service import create_app
from soorma.client import Identity
from soorma.memory import MemoryClient
from testsupport.postgres import create_schema, drop_schema
from testsupport.services import SQL_BACKENDS, in_process, memory_settings

MemoryFactory = Callable[..., MemoryClient]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=SQL_BACKENDS)
async def memory_http(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client wired to a live memory-service app (lifespan and migrations run),
    shared by the module's tests on one backend (``loop_scope="module"`` tests)."""
    tmp = tmp_path_factory.mktemp("memory")
    database: str | None = None
    role: str | None = None
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/memory.db"
    else:
        database = request.getfixturevalue("postgres_test_database")
        role, url = await create_schema(database)
    try:
        async with in_process(create_app(memory_settings(url, tmp))) as http:
            yield http
    finally:
        if database is not None and role is not None:
            await drop_schema(database, role)


@pytest.fixture
def make_memory(memory_http: httpx.AsyncClient) -> MemoryFactory:
    """``make_memory(tenant="acme")``: a MemoryClient acting as that tenant (a name
    of this test's own: other tests' ``acme`` is another tenant)."""
    run = uuid.uuid4().hex[:10]

    def factory(tenant: str = "tenant-a", user: str = "user-1") -> MemoryClient:
        return MemoryClient(
            base_url="http://memory",
            http=memory_http,
            identity=Identity(tenant_id=f"{tenant}-{run}", user_id=user),
        )

    return factory


@pytest.fixture
def memory(make_memory: MemoryFactory) -> MemoryClient:
    return make_memory()
