"""Shared helpers of the SQL store: one code path for SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memory_service.sql.driver import (
    AsyncpgRunner,
    DriverStatements,
    SqlAlchemyRunner,
    StatementRunner,
)
from soorma_common.errors import VersionConflict
from soorma_common.memory import PlanContextRecord, TaskContextRecord


def stored_bookkeeping(record: PlanContextRecord | TaskContextRecord) -> dict[str, Any]:
    """A record's SDK bookkeeping as its column stores it (JSON, defaults left out)."""
    return record.bookkeeping.model_dump(mode="json", exclude_defaults=True)


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
        self._statements = DriverStatements(engine.dialect)

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

        On PostgreSQL the statement goes straight to the pooled asyncpg connection (see
        :mod:`memory_service.sql.driver`). Retried once on a connection the database
        dropped (e.g. after a restart; the pool does not ping connections before use): a
        read is safe to repeat.
        """
        for attempt in range(2):
            async with self._autocommit.connect() as conn:
                if not self._pg:
                    return await SqlAlchemyRunner(conn).fetchrow(statement, params)
                raw = (await conn.get_raw_connection()).driver_connection
                try:
                    return await AsyncpgRunner(raw, self._statements).fetchrow(statement, params)
                except Exception:
                    if not raw.is_closed():
                        raise
                    await self._drop_if_closed(conn, raw)
                    if attempt:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[StatementRunner]:
        """One write transaction of prebuilt statements (asyncpg directly on PostgreSQL).

        Not retried: whether a failed commit happened is unknown to us.
        """
        if not self._pg:
            async with self.engine.begin() as conn:
                yield SqlAlchemyRunner(conn)
            return
        async with self._autocommit.connect() as conn:
            raw = (await conn.get_raw_connection()).driver_connection
            try:
                async with raw.transaction():
                    yield AsyncpgRunner(raw, self._statements)
            except BaseException:
                await self._drop_if_closed(conn, raw)
                raise

    async def _drop_if_closed(self, conn: AsyncConnection, raw: Any) -> None:
        if raw.is_closed():
            # The server dropped it (restart?): the pool's other connections are likely
            # gone too. Replace the pool, as SQLAlchemy does on a disconnect it detects.
            await conn.invalidate()
            await self.engine.dispose(close=False)

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def close(self) -> None:
        await self.engine.dispose()


R = TypeVar("R")


async def versioned_write(
    *,
    expected_version: int | None,
    must_exist: bool,
    upsert: Callable[[], Awaitable[R | None]],
    create: Callable[[], Awaitable[R | None]],
    update: Callable[[int | None], Awaitable[R | None]],
    current_version: Callable[[], Awaitable[int | None]],
    not_found: Callable[[], Exception],
) -> R:
    """The one versioned write of plan and task contexts: which statement runs, and what
    a statement that wrote nothing means.

    - no ``expected_version``, not ``must_exist``: ``upsert`` (create, or bump the version);
    - ``expected_version`` 0: ``create`` only if absent (``VersionConflict`` naming the
      stored version otherwise);
    - no ``expected_version``, ``must_exist``: ``update(None)``, any stored version;
    - ``expected_version`` n: ``update(n)``, only that version (``VersionConflict``).

    ``update`` and ``create`` return ``None`` when they wrote nothing; ``current_version``
    then tells a missing record (``not_found()``) from a newer one.
    """
    if expected_version is None and not must_exist:
        row = await upsert()
    elif expected_version == 0:
        row = await create()
        if row is None:
            raise conflict_on_create(await current_version() or 0)
    else:
        row = await versioned_update(
            update,
            expected_version=expected_version,
            current_version=current_version,
            not_found=not_found,
        )
    assert row is not None  # an upsert always returns its row
    return row


async def versioned_update(
    update: Callable[[int | None], Awaitable[R | None]],
    *,
    expected_version: int | None,
    current_version: Callable[[], Awaitable[int | None]],
    not_found: Callable[[], Exception],
) -> R:
    """``update(expected_version)``'s row; ``not_found()`` or ``VersionConflict`` when it
    wrote nothing (``None``: any stored version will do)."""
    row = await update(expected_version)
    if row is not None:
        return row
    current = None if expected_version is None else await current_version()
    if expected_version is None or current is None:
        raise not_found()
    raise version_conflict(expected_version, current)


def version_conflict(expected_version: int, current: int) -> VersionConflict:
    return VersionConflict(
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
