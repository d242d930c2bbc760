"""The tracker's database: engine, migrations, the write lock and dialect-neutral upserts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from servicekit.db import make_engine, migrate

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "tracker_alembic_version"
# Serializes projection batches and timeout claims across replicas (PostgreSQL).
WRITE_LOCK_KEY = 0x7A_C4_E2_01
LOCK_TIMEOUT = "10s"

Merge = Callable[[Any, Any], Any]


def _least(current: Any, new: Any) -> Any:
    return sa.case((new < current, new), else_=current)


def _greatest(current: Any, new: Any) -> Any:
    return sa.case((new > current, new), else_=current)


def _add(current: Any, new: Any) -> Any:
    return current + new


MERGES: dict[str, Merge] = {"least": _least, "greatest": _greatest, "add": _add}


async def open_engine(url: str) -> AsyncEngine:
    """An engine on ``url`` with the tracker's migrations applied."""
    engine = make_engine(url)
    try:
        await migrate(engine, MIGRATIONS, version_table=VERSION_TABLE)
    except BaseException:
        await engine.dispose()
        raise
    return engine


async def lock_writes(conn: AsyncConnection) -> None:
    """Take the tracker's write lock for the rest of this transaction.

    PostgreSQL: a transaction-scoped advisory lock. SQLite: a first write takes the
    database's single writer lock now, so a read-then-write never fails half way.
    """
    if conn.dialect.name == "postgresql":
        # Bounded: a replica that died holding the lock (its transaction not yet ended by
        # the server) makes this batch fail and retry instead of waiting forever.
        await conn.execute(
            sa.text("SELECT set_config('lock_timeout', :t, true), pg_advisory_xact_lock(:k)"),
            {"t": LOCK_TIMEOUT, "k": WRITE_LOCK_KEY},
        )
    else:
        await conn.execute(
            sa.text("UPDATE tracker_counters SET value = value WHERE name = 'events'")
        )


async def upsert(
    conn: AsyncConnection,
    table: sa.Table,
    keys: Sequence[str],
    rows: Sequence[dict[str, Any]],
    *,
    update: bool | dict[str, str] = True,
) -> None:
    """Insert ``rows``; on a key conflict replace the other columns (``update=True``),
    keep the row (``False``), or merge the named columns (``{"col": "least"|"greatest"|"add"}``).
    """
    if not rows:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(table)
    if update is False:
        stmt = stmt.on_conflict_do_nothing(index_elements=list(keys))
    else:
        excluded = stmt.excluded
        if update is True:
            values = {
                c.name: excluded[c.name]
                for c in table.columns
                if c.name not in keys and c.name in rows[0]
            }
        else:
            values = {
                name: MERGES[how](table.c[name], excluded[name]) for name, how in update.items()
            }
        stmt = stmt.on_conflict_do_update(index_elements=list(keys), set_=values)
    await conn.execute(stmt, list(rows))
