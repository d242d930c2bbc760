"""Memory-service fixtures: every test runs on SQLite and, when configured, PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memory_service import create_app
from memory_service.settings import Settings
from testsupport.pgvector import create_database, drop_database
from testsupport.services import db_url, in_process, memory_settings
from testsupport.shared_memory import shared_memory_app

# Fixtures: pytest finds them by their names in this module.
__all__ = ["db_url", "shared_memory_app"]

ClientFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def make_settings(db_url: str, tmp_path: Any) -> Callable[..., Settings]:
    # The background pruner stays out of the tests' way; retention is tested by calling
    # the prune function directly.
    def factory(**overrides: Any) -> Settings:
        return memory_settings(db_url, tmp_path, **overrides)

    return factory


@pytest.fixture
def make_client(make_settings: Callable[..., Settings]) -> ClientFactory:
    """Start a memory-service app (settings overridable) and give an in-process client."""

    def factory(**overrides: Any) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        return in_process(create_app(make_settings(**overrides)), base_url="http://memory")

    return factory


@pytest_asyncio.fixture
async def client(make_client: ClientFactory) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client() as c:
        yield c


# --- long-term memory: SQLite and PostgreSQL + pgvector, always both -------------------


@pytest_asyncio.fixture
async def pgvector_url(pgvector_server_url: str) -> AsyncIterator[str]:
    """A fresh database on the pgvector server (``tests/conftest.py``), dropped after."""
    name, url = await create_database(pgvector_server_url)
    yield url
    await drop_database(pgvector_server_url, name)


@pytest.fixture(params=["sqlite", "pgvector"])
def lt_db_url(request: pytest.FixtureRequest) -> str:
    """Long-term memory runs on SQLite and on PostgreSQL with pgvector, never skipped."""
    name = "sqlite_url" if request.param == "sqlite" else "pgvector_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest.fixture
def make_lt_client(lt_db_url: str, tmp_path: Any) -> ClientFactory:
    """A memory service on ``lt_db_url`` with the deterministic embedder (overridable)."""

    def factory(**overrides: Any) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        values = {"embedding_model": "deterministic/256", **overrides}
        settings = memory_settings(lt_db_url, tmp_path, **values)
        return in_process(create_app(settings), base_url="http://memory")

    return factory


@pytest_asyncio.fixture
async def lt_client(make_lt_client: ClientFactory) -> AsyncIterator[httpx.AsyncClient]:
    async with make_lt_client() as c:
        yield c


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["sqlite", "pgvector"])
async def shared_lt_client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[httpx.AsyncClient]:
    """One memory service per test module and backend (deterministic embedder), for
    tests that need no fresh database: each acts as its own tenant (:func:`own_tenant`).

    The module's tests run in the module's event loop
    (``pytestmark = pytest.mark.asyncio(loop_scope="module")``). A fresh app per test
    costs far more than the request it checks: migrations, and FastAPI building every
    route on the app's first requests.
    """
    tmp = tmp_path_factory.mktemp("shared-lt")
    server_url: str | None = None
    name: str | None = None
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/test.db"
    else:
        server_url = request.getfixturevalue("pgvector_server_url")
        name, url = await create_database(server_url)
    try:
        settings = memory_settings(url, tmp, embedding_model="deterministic/256")
        async with in_process(create_app(settings), base_url="http://memory") as c:
            yield c
    finally:
        if server_url is not None and name is not None:
            await drop_database(server_url, name)


@pytest.fixture
def own_tenant() -> dict[str, str]:
    """Identity headers of a tenant no other test uses (user ``alice``)."""
    return {"X-Tenant-ID": f"tenant-{uuid.uuid4().hex[:12]}", "X-User-ID": "alice"}


@pytest_asyncio.fixture(loop_scope="module")
async def tenant_client(shared_memory_app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the module's shared memory service acting, unless a request says
    otherwise, as a tenant no other test uses: every record of the service belongs to
    a tenant, so the test sees an empty service. Its tests run in the module's loop
    (``pytestmark = pytest.mark.asyncio(loop_scope="module")``)."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(shared_memory_app),
        base_url="http://memory",
        headers={"X-Tenant-ID": f"tenant-{uuid.uuid4().hex[:12]}"},
    ) as c:
        yield c
