"""Services migrating at the same moment (one process, or replicas) must not collide."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memory_service.sql import open_sql_store
from registry_service.app import open_store as open_registry_store
from registry_service.settings import Settings as RegistrySettings

pytestmark = pytest.mark.asyncio


async def _migrate_all_at_once(url: str) -> None:
    stores = await asyncio.wait_for(
        asyncio.gather(
            open_sql_store(url),
            open_registry_store(RegistrySettings(registry_database_url=url)),
            open_sql_store(url),
            open_registry_store(RegistrySettings(registry_database_url=url)),
        ),
        timeout=60,
    )
    for store in stores:
        await store.close()


async def test_concurrent_migrations_on_one_sqlite_file(tmp_path: Path) -> None:
    await _migrate_all_at_once(f"sqlite+aiosqlite:///{tmp_path}/shared.db")


@pytest.mark.postgres
async def test_concurrent_migrations_on_one_postgres_database(postgres_url: str) -> None:
    await _migrate_all_at_once(postgres_url)
    # And again: a restart finds everything at head.
    await _migrate_all_at_once(postgres_url)
