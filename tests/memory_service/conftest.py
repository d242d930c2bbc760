"""Memory-service fixtures: every test runs on SQLite and, when configured, PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memory_service import create_app
from memory_service.settings import Settings
from testsupport.services import db_url, in_process, memory_settings

__all__ = ["db_url"]  # a fixture: pytest finds it by its name in this module

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
