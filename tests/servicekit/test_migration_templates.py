"""A SQLite database given its service's migration template equals one migrated for real
(tests/testsupport/migration_templates.py): the same objects with the same SQL, shadow
tables and automatic indexes included, and the same rows."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Connection

from servicekit.db import make_engine, migrate
from testsupport import migration_templates

pytestmark = pytest.mark.asyncio

# service -> module with its MIGRATIONS and VERSION_TABLE
SERVICES = {
    "gateway": "gateway_a2a.store",
    "memory": "memory_service.sql",
    "registry": "registry_service.app",
    "tracker": "tracker_service.db",
}


def contents(connection: Connection) -> dict[str, Any]:
    objects = connection.exec_driver_sql(
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    ).all()
    rows = {
        name: sorted(map(tuple, connection.exec_driver_sql(f'SELECT * FROM "{name}"')))
        for kind, name, _, sql in objects
        if kind == "table" and not (sql or "").upper().startswith("CREATE VIRTUAL")
    }
    return {"objects": [tuple(o) for o in objects], "rows": rows}


async def migrated(url: str, *services: str) -> dict[str, Any]:
    """``services`` migrated in turn on one database; what it holds then."""
    engine = make_engine(url)
    try:
        for service in services:
            module = importlib.import_module(SERVICES[service])
            await migrate(engine, module.MIGRATIONS, version_table=module.VERSION_TABLE)
        async with engine.connect() as conn:
            return await conn.run_sync(contents)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("service", sorted(SERVICES))
async def test_a_templated_database_equals_a_migrated_one(service: str, tmp_path: Path) -> None:
    with migration_templates.disabled():
        real = await migrated(f"sqlite+aiosqlite:///{tmp_path}/real.db", service)
    await migrated(f"sqlite+aiosqlite:///{tmp_path}/first.db", service)  # keeps a template
    before = migration_templates.replays()
    templated = await migrated(f"sqlite+aiosqlite:///{tmp_path}/templated.db", service)
    assert migration_templates.replays() == before + 1
    assert templated == real
    assert real["rows"]  # the version table's row at least


async def test_a_service_after_another_on_one_database_gets_its_own_template(
    tmp_path: Path,
) -> None:
    with migration_templates.disabled():
        real = await migrated(f"sqlite+aiosqlite:///{tmp_path}/real.db", "tracker", "memory")
    await migrated(f"sqlite+aiosqlite:///{tmp_path}/first.db", "tracker", "memory")
    before = migration_templates.replays()
    templated = await migrated(f"sqlite+aiosqlite:///{tmp_path}/again.db", "tracker", "memory")
    assert migration_templates.replays() == before + 2
    assert templated == real
    # Memory's template after the tracker's tables is not the one for an empty database.
    alone = await migrated(f"sqlite+aiosqlite:///{tmp_path}/alone.db", "memory")
    assert {o[1] for o in alone["objects"]} < {o[1] for o in real["objects"]}
