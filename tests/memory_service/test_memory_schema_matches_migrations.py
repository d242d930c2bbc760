"""The memory service's SQLModel tables and its Alembic migrations describe the same schema."""

from __future__ import annotations

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection

from memory_service.models import metadata
from memory_service.sql import MIGRATIONS, VERSION_TABLE
from servicekit.db import make_engine, migrate
from testsupport.services import db_url

__all__ = ["db_url"]

pytestmark = pytest.mark.asyncio


def differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "version_table": VERSION_TABLE}
    )
    return [
        diff
        for diff in compare_metadata(context, metadata)
        if not (diff[0] == "remove_table" and diff[1].name == VERSION_TABLE)
    ]


async def test_migrated_database_matches_the_models(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        await migrate(engine, MIGRATIONS, version_table=VERSION_TABLE)
        async with engine.connect() as conn:
            assert await conn.run_sync(differences) == []
    finally:
        await engine.dispose()
