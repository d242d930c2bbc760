"""Shared helpers of the SQL store: one code path for SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from soorma_common.errors import VersionConflict


def utcnow() -> datetime:
    return datetime.now(UTC)


def utc(value: datetime) -> datetime:
    """SQLite returns naive datetimes; everything we store is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class SqlBase:
    """Holds the engine and the dialect-specific bits (``INSERT ... ON CONFLICT``).

    Write transactions always start with a write statement. On SQLite that takes the
    database write lock up front (like ``BEGIN IMMEDIATE``), so concurrent writers queue
    on the busy timeout instead of failing on a stale read snapshot; on PostgreSQL the
    first ``UPDATE``/``INSERT ... ON CONFLICT`` locks the record's row, which serializes
    writers of one record (the ``SELECT ... FOR UPDATE`` of a read-modify-write, without
    the extra round trip).
    """

    def __init__(self, *, engine: AsyncEngine) -> None:
        self.engine = engine
        self._pg = engine.dialect.name == "postgresql"
        # Same pool, no transaction: a single statement is atomic on its own, and the
        # driver's BEGIN/ROLLBACK would double the round trips of a one-row read.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._compiled: dict[sa.Executable, tuple[str, tuple[tuple[str, Any], ...]]] = {}

    def insert(self, table: sa.Table) -> Any:
        """A dialect ``insert`` that supports ``on_conflict_do_update/nothing``."""
        return postgresql.insert(table) if self._pg else sqlite.insert(table)

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection]:
        """A connection for a multi-statement read.

        On Postgres it reads one snapshot (``REPEATABLE READ``), so a record and its
        side-table rows (sub-tasks, correlation ids) always come from the same commit.
        """
        async with self.engine.connect() as conn:
            if self._pg:
                await conn.execution_options(isolation_level="REPEATABLE READ")
            yield conn

    async def fetch_row(
        self, statement: sa.Executable, params: dict[str, Any]
    ) -> Mapping[str, Any] | None:
        """The first row of one self-contained read (by column name), outside a transaction.

        On PostgreSQL the statement's SQL (compiled once by SQLAlchemy) is sent straight to
        the pooled asyncpg connection: SQLAlchemy's execution layer cost more CPU than the
        driver itself on the hot reads. JSON columns still come back decoded (the dialect
        installs its codec on each connection). Retried once on a connection the database
        dropped (e.g. after a restart; the pool does not ping connections before use): a
        read is safe to repeat.
        """
        for attempt in range(2):
            async with self._autocommit.connect() as conn:
                if not self._pg:
                    return (await conn.execute(statement, params)).mappings().first()
                sql, binds = self._driver_sql(statement)
                raw = (await conn.get_raw_connection()).driver_connection
                try:
                    record: Mapping[str, Any] | None = await raw.fetchrow(
                        sql, *[params.get(name, fixed) for name, fixed in binds]
                    )
                    return record
                except Exception:
                    if not raw.is_closed():
                        raise
                    # The server dropped it (restart?): the pool's other connections are
                    # likely gone too. Replace the pool as SQLAlchemy does on a disconnect.
                    await conn.invalidate()
                    await self.engine.dispose(close=False)
                    if attempt:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _driver_sql(self, statement: sa.Executable) -> tuple[str, tuple[tuple[str, Any], ...]]:
        """Driver SQL of a statement and its ``$n`` parameters: ``(name, fixed value)``.

        Fixed values are the statement's own literals (e.g. ``LIMIT 1``); named bind
        parameters are taken from the call's ``params``. Compiled once per statement.
        """
        cached = self._compiled.get(statement)
        if cached is None:
            compiled = statement.compile(dialect=self.engine.dialect)  # type: ignore[attr-defined]
            binds = tuple((name, compiled.params.get(name))
                          for name in compiled.positiontup or ())
            cached = self._compiled[statement] = (str(compiled), binds)
        return cached

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def close(self) -> None:
        await self.engine.dispose()


async def check_version_update(
    conn: AsyncConnection,
    table: sa.Table,
    where: sa.ColumnElement[bool],
    *,
    expected_version: int,
    not_found: Exception,
) -> None:
    """Raise the right error after a version-guarded UPDATE touched no row."""
    current = (await conn.execute(sa.select(table.c.version).where(where))).scalar()
    if current is None:
        raise not_found
    raise VersionConflict(
        f"version conflict: expected version {expected_version}, current version is "
        f"{current}; re-read the record and retry",
        details={"expected_version": expected_version, "current_version": current},
    )


def conflict_on_create(current: int) -> VersionConflict:
    return VersionConflict(
        f"version conflict: expected the record not to exist (version 0), current version "
        f"is {current}; re-read the record and retry",
        details={"expected_version": 0, "current_version": current},
    )
