"""SQLite databases get what their migrations made the first time in this test process.

Every SQLite test starts its services on a new database, and each service runs its
Alembic migrations at start-up: hundreds of upgrades a run, 27 s of the workers' wall
time and 19 s of their CPU (docs/testing.md). Here the first upgrade of a service on a
SQLite database holding a given schema (nothing, or another service's tables) runs the
real migrations (``servicekit.db.migrate``, unchanged). What they added is kept: the
statements of the new objects of ``sqlite_master`` in creation order (shadow tables left
to the virtual tables that make them) and the rows of the new tables (the version
table's). The next database holding the same schema gets the same statements and rows,
in the transaction the migrations would have run in.

A database the service migrated before (an older revision a test set up) is upgraded
for real, and so is every PostgreSQL database (their time is the server's DDL).
``install`` is called by ``tests/conftest.py``; ``tests/servicekit/
test_migration_templates.py`` compares replayed databases with migrated ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection

import servicekit.db

Upgrade = Callable[[Connection, Path, str], None]

_NOT_INTERNAL = "name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"


@dataclass(frozen=True)
class Template:
    statements: tuple[str, ...]
    # (table, columns, rows) of each table the migrations left rows in.
    rows: tuple[tuple[str, tuple[str, ...], tuple[tuple[Any, ...], ...]], ...]


@dataclass
class _State:
    real: Upgrade | None = None
    enabled: bool = True
    replays: int = 0


_templates: dict[tuple[str, str, tuple[tuple[str, str, str], ...]], Template | None] = {}
_state = _State()


def _objects(connection: Connection) -> list[tuple[str, str, str]]:
    """(type, name, sql) of the database's objects, in creation order (an object's rowid
    is above those of every object existing when it was made)."""
    return [
        (kind, name, sql)
        for kind, name, sql in connection.exec_driver_sql(
            f"SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND {_NOT_INTERNAL} "
            "ORDER BY rowid"
        )
    ]


def capture(connection: Connection, before: list[tuple[str, str, str]]) -> Template | None:
    """What was made on ``connection`` since it held ``before``: the new objects and the
    rows of the new tables; None if an object of ``before`` changed or went."""
    after = _objects(connection)
    old = set(before)
    if not old <= set(after):
        return None
    shadow = {
        name
        for name, kind in connection.exec_driver_sql(
            "SELECT name, type FROM pragma_table_list WHERE schema = 'main'"
        )
        if kind == "shadow"
    }
    statements: list[str] = []
    rows: list[tuple[str, tuple[str, ...], tuple[tuple[Any, ...], ...]]] = []
    for kind, name, sql in after:
        if (kind, name, sql) in old or name in shadow:
            continue
        statements.append(sql)
        if kind == "table" and not sql.upper().startswith("CREATE VIRTUAL"):
            result = connection.exec_driver_sql(f'SELECT * FROM "{name}"')
            found = tuple(tuple(row) for row in result)
            if found:
                rows.append((name, tuple(result.keys()), found))
    return Template(tuple(statements), tuple(rows))


def replay(connection: Connection, template: Template) -> None:
    for statement in template.statements:
        connection.exec_driver_sql(statement)
    for table, columns, found in template.rows:
        names = ", ".join(f'"{c}"' for c in columns)
        marks = ", ".join("?" for _ in columns)
        connection.exec_driver_sql(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', list(found))


def _upgrade(connection: Connection, script_location: Path, version_table: str) -> None:
    real = _state.real
    assert real is not None
    if not _state.enabled or connection.dialect.name != "sqlite":
        real(connection, script_location, version_table)
        return
    before = _objects(connection)
    if any(name == version_table for _, name, _ in before):
        real(connection, script_location, version_table)  # migrated before: an upgrade
        return
    key = (str(script_location), version_table, tuple(before))
    if key not in _templates:
        real(connection, script_location, version_table)
        _templates[key] = capture(connection, before)
        return
    template = _templates[key]
    if template is None:
        real(connection, script_location, version_table)
        return
    replay(connection, template)
    _state.replays += 1


def install() -> None:
    """Route servicekit's migrations through the templates (once per process)."""
    if _state.real is None:
        _state.real = servicekit.db._upgrade
        servicekit.db._upgrade = _upgrade


def replays() -> int:
    """How many databases got a template instead of their migrations."""
    return _state.replays


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run the real migrations on every database meanwhile."""
    before, _state.enabled = _state.enabled, False
    try:
        yield
    finally:
        _state.enabled = before
