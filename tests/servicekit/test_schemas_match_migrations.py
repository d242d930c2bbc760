"""Each service's SQLModel tables and its Alembic migrations describe the same schema.

A column added to a model without a migration (or the other way round) fails here, on
SQLite and on PostgreSQL.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData
from sqlalchemy.engine import Connection

from servicekit.db import make_engine, migrate
from testsupport.services import db_url

__all__ = ["db_url"]

pytestmark = pytest.mark.asyncio

# service -> (module with MIGRATIONS and VERSION_TABLE, module with the models' metadata)
SERVICES = {
    "memory": ("memory_service.sql", "memory_service.models"),
    "registry": ("registry_service.app", "registry_service.models"),
    "tracker": ("tracker_service.db", "tracker_service.models"),
}


# Tables created by raw, engine-specific DDL rather than from models (pgvector columns,
# generated tsvector, FTS5 and its shadow tables): tests/memory_service covers them.
RAW_DDL_PREFIXES = ("memory_semantic", "memory_episodes", "memory_procedures")


def _modelled(name: str | None, type_: str, _parents: Any) -> bool:
    return not (type_ == "table" and name is not None and name.startswith(RAW_DDL_PREFIXES))


def differences(connection: Connection, metadata: MetaData, version_table: str) -> list[Any]:
    context = MigrationContext.configure(
        connection,
        opts={"compare_type": True, "version_table": version_table, "include_name": _modelled},
    )
    return [
        diff
        for diff in compare_metadata(context, metadata)
        if not (diff[0] == "remove_table" and diff[1].name == version_table)
    ]


@pytest.mark.parametrize("service", sorted(SERVICES))
async def test_migrated_database_matches_the_models(service: str, db_url: str) -> None:
    migrations_module, models_module = SERVICES[service]
    migrations = importlib.import_module(migrations_module)
    metadata = importlib.import_module(models_module).metadata
    engine = make_engine(db_url)
    try:
        await migrate(engine, migrations.MIGRATIONS, version_table=migrations.VERSION_TABLE)
        async with engine.connect() as conn:
            found = await conn.run_sync(differences, metadata, migrations.VERSION_TABLE)
        assert found == []
    finally:
        await engine.dispose()
