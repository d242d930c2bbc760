"""MemoryClient fixtures: the real memory service in-process, on SQLite and PostgreSQL.

One service per test module and backend: a fresh app per test cost more than the test
(migrations, FastAPI building its routes on the first requests). Every record of the
memory service belongs to a tenant, so tests stay apart by tenant: :func:`make_memory`
gives each test tenants of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import pytest_asyncio

from soorma.client import Identity
from soorma.memory import MemoryClient
from testsupport.shared_memory import shared_memory_app

__all__ = ["shared_memory_app"]  # a fixture: pytest finds it by its name in this module

MemoryFactory = Callable[..., MemoryClient]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def memory_http(shared_memory_app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the module's memory service (testsupport.shared_memory), shared
    by the module's tests on one backend (``loop_scope="module"`` tests)."""
    transport = httpx.ASGITransport(shared_memory_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://memory") as http:
        yield http


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
