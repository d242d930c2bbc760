"""Database plumbing: one async engine per service, Alembic migrations at start-up.

The same code path serves SQLite (embedded default, a file under ``data_dir``) and
PostgreSQL (``postgresql+asyncpg://``). Each service keeps its own Alembic folder;
its ``env.py`` calls :func:`run_migrations_in_env`.
"""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from servicekit.settings import StorageSettings


def database_url(settings: StorageSettings, service: str, override: str | None = None) -> str:
    """The service's database URL: explicit override, ``SOORMA_DATABASE_URL``, or SQLite."""
    url = override or settings.database_url
    if url:
        if url.startswith("postgresql://") or url.startswith("postgres://"):
            url = "postgresql+asyncpg://" + url.split("://", 1)[1]
        return url
    data_dir = Path(settings.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite+aiosqlite:///{(data_dir / f'{service}.db').resolve()}"


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def make_engine(url: str, **kwargs: Any) -> AsyncEngine:
    """An async engine tuned for the backend (WAL and busy timeout on SQLite)."""
    if is_sqlite(url):
        engine = create_async_engine(url, connect_args={"timeout": 30}, **kwargs)

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    kwargs.setdefault("pool_size", 20)
    kwargs.setdefault("max_overflow", 20)
    kwargs.setdefault("pool_pre_ping", True)
    return create_async_engine(url, **kwargs)


def _upgrade(connection: Connection, script_location: Path, version_table: str) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(script_location))
    config.attributes["connection"] = connection
    config.attributes["version_table"] = version_table
    command.upgrade(config, "head")


# Alembic keeps the running migration's context in a module-level proxy. Two migrations
# interleaving in one process (``soorma dev`` starts every service's lifespan at once, and
# run_sync yields to the event loop on each statement) would overwrite each other's context,
# so migrations in one process run one at a time.
_process_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)
# Across processes (replicas starting together on one PostgreSQL database) a transaction-level
# advisory lock does the same; SQLite's single writer already serializes DDL.
MIGRATION_LOCK_KEY = 0x50_0A_4D_A1


def _process_lock() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    lock = _process_locks.get(loop)
    if lock is None:
        lock = _process_locks[loop] = asyncio.Lock()
    return lock


async def migrate(engine: AsyncEngine, script_location: Path, *, version_table: str) -> None:
    """Apply the service's Alembic migrations up to head (idempotent, safe to race)."""
    async with _process_lock(), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        await conn.run_sync(_upgrade, script_location, version_table)


def run_migrations_in_env(target_metadata: Any) -> None:
    """Body of a service's Alembic ``env.py``: migrate on the connection we were handed.

    Only online migrations on a connection provided by :func:`migrate` are supported;
    services run them at start-up.
    """
    from alembic import context

    config = context.config
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("run migrations through servicekit.db.migrate()")
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=config.attributes.get("version_table", "alembic_version"),
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
