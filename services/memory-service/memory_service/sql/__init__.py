"""The SQL memory store: one code path for SQLite (embedded) and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import orjson

from memory_service.longterm.dialect import install_sqlite_vectors
from memory_service.sql.plans import SqlPlans
from memory_service.sql.sessions import SqlSessions
from memory_service.sql.tasks import SqlTaskContexts
from memory_service.sql.working_memory import SqlWorkingMemory
from servicekit.db import make_engine, migrate

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
VERSION_TABLE = "memory_alembic_version"
# Database connections per service process (the pool never opens more).
POOL_SIZE = 20


class SqlMemoryStore(SqlTaskContexts, SqlPlans, SqlSessions, SqlWorkingMemory):
    """:class:`memory_service.store.MemoryStore` on an injected SQLAlchemy async engine.

    Args:
        engine: An engine from :func:`servicekit.db.make_engine`, already migrated.
    """


def _json_dumps(value: object) -> str:
    return orjson.dumps(value).decode()


async def open_sql_store(url: str) -> SqlMemoryStore:
    """Build the engine for ``url``, apply the migrations, return the store."""
    # No pre-ping: on asyncpg it is three round trips (BEGIN, ping, ROLLBACK) per checkout,
    # more than a plan read itself. A connection the database dropped fails its statement
    # instead; SQLAlchemy then replaces every pooled connection, and reads retry once.
    # No overflow connections: under sustained concurrency above the pool size they were
    # opened and closed per request (TLS probe, startup, auth: ~40% of the CPU at 50
    # clients). Requests beyond POOL_SIZE wait for a pooled connection instead.
    engine = make_engine(
        url,
        json_serializer=_json_dumps,
        json_deserializer=orjson.loads,
        pool_pre_ping=False,
        pool_size=POOL_SIZE,
        max_overflow=0,
    )
    if engine.dialect.name == "sqlite":
        install_sqlite_vectors(engine)
    try:
        await migrate(engine, MIGRATIONS, version_table=VERSION_TABLE)
    except BaseException:
        await engine.dispose()
        raise
    return SqlMemoryStore(engine=engine)


__all__ = ["MIGRATIONS", "VERSION_TABLE", "SqlMemoryStore", "open_sql_store"]
