"""MemoryClient fixtures: the real memory service in-process, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memory_service import create_app
from soorma.client import Identity
from soorma.memory import MemoryClient
from testsupport.services import db_url, in_process, memory_settings

__all__ = ["db_url"]  # a fixture: pytest finds it by its name in this module

MemoryFactory = Callable[..., MemoryClient]


@pytest_asyncio.fixture
async def memory_http(db_url: str, tmp_path: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client wired to a live memory-service app (lifespan and migrations run)."""
    async with in_process(create_app(memory_settings(db_url, tmp_path))) as http:
        yield http


@pytest.fixture
def make_memory(memory_http: httpx.AsyncClient) -> MemoryFactory:
    """``make_memory(tenant="acme")``: a MemoryClient acting as that tenant."""

    def factory(tenant: str = "tenant-a", user: str = "user-1") -> MemoryClient:
        return MemoryClient(
            base_url="http://memory",
            http=memory_http,
            identity=Identity(tenant_id=tenant, user_id=user),
        )

    return factory


@pytest.fixture
def memory(make_memory: MemoryFactory) -> MemoryClient:
    return make_memory()
