"""SQLAlchemy Core statements sent straight to asyncpg on the hot paths.

On the plan-context hot paths SQLAlchemy's execution layer (connection and execution
context objects, cursor adaptation, greenlet hops, result wrapping) cost more CPU than the
asyncpg driver itself. The statements stay SQLAlchemy Core, built once: each is compiled
once for the engine's dialect, and its SQL, parameter order and bind processors (JSON
serialization) are reused for every call. Connections still come from the engine's pool,
and the dialect's JSON codec (installed on every pooled connection) still decodes results.

:class:`StatementRunner` is what the store's code sees: the same three calls over a
SQLAlchemy connection (SQLite) or a raw asyncpg connection (PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection


class StatementRunner(Protocol):
    """Runs prebuilt statements with named parameters (the store's only view of a driver)."""

    async def fetchrow(
        self, statement: sa.Executable, params: Mapping[str, Any]
    ) -> Mapping[str, Any] | None: ...

    async def execute(self, statement: sa.Executable, params: Mapping[str, Any]) -> None: ...

    async def executemany(
        self, statement: sa.Executable, rows: Sequence[Mapping[str, Any]]
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class _Bind:
    name: str
    fixed: Any  # the statement's own value (e.g. LIMIT 1), used when params lack the name
    process: Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class DriverStatement:
    """A statement compiled for the driver: ``$n`` SQL and how to build its arguments."""

    sql: str
    binds: tuple[_Bind, ...]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        out = []
        for bind in self.binds:
            value = params.get(bind.name, bind.fixed)
            out.append(value if bind.process is None else bind.process(value))
        return out


class DriverStatements:
    """Compiles each statement once for ``dialect`` (positional ``$n`` parameters)."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._cache: dict[sa.Executable, DriverStatement] = {}

    def __getitem__(self, statement: sa.Executable) -> DriverStatement:
        found = self._cache.get(statement)
        if found is None:
            compiled = statement.compile(dialect=self._dialect)  # type: ignore[attr-defined]
            binds = []
            for name in compiled.positiontup or ():
                type_ = compiled.binds[name].type.dialect_impl(self._dialect)
                binds.append(
                    _Bind(name, compiled.params.get(name), type_.bind_processor(self._dialect))
                )
            found = self._cache[statement] = DriverStatement(str(compiled), tuple(binds))
        return found


class AsyncpgRunner:
    """:class:`StatementRunner` on a raw asyncpg connection (PostgreSQL hot paths)."""

    def __init__(self, connection: Any, statements: DriverStatements) -> None:
        self._conn = connection
        self._statements = statements

    async def fetchrow(
        self, statement: sa.Executable, params: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        compiled = self._statements[statement]
        row: Mapping[str, Any] | None = await self._conn.fetchrow(
            compiled.sql, *compiled.args(params)
        )
        return row

    async def execute(self, statement: sa.Executable, params: Mapping[str, Any]) -> None:
        compiled = self._statements[statement]
        await self._conn.execute(compiled.sql, *compiled.args(params))

    async def executemany(
        self, statement: sa.Executable, rows: Sequence[Mapping[str, Any]]
    ) -> None:
        compiled = self._statements[statement]
        await self._conn.executemany(compiled.sql, [compiled.args(row) for row in rows])


class SqlAlchemyRunner:
    """:class:`StatementRunner` on a SQLAlchemy connection (SQLite)."""

    def __init__(self, connection: AsyncConnection) -> None:
        self._conn = connection

    async def fetchrow(
        self, statement: sa.Executable, params: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        return (await self._conn.execute(statement, dict(params))).mappings().first()

    async def execute(self, statement: sa.Executable, params: Mapping[str, Any]) -> None:
        await self._conn.execute(statement, dict(params))

    async def executemany(
        self, statement: sa.Executable, rows: Sequence[Mapping[str, Any]]
    ) -> None:
        await self._conn.execute(statement, [dict(row) for row in rows])
