"""A schema of its own on the PostgreSQL of ``SOORMA_TEST_DATABASE_URL``, for a test or a
test module: a role (a superuser, like the server's admin user) whose search path is only
its schema, so its connections see an empty database. ``tests/conftest.py`` gives each
test process a database for these (``postgres_test_database``).

A ``CREATE DATABASE`` cost 250-350 ms on a PostgreSQL that syncs to disk; a role and a
schema cost about a millisecond.
"""

from __future__ import annotations

import uuid

from sqlalchemy.engine import make_url


def plain(url: str) -> str:
    """The asyncpg form of a SQLAlchemy ``postgresql+asyncpg://`` URL."""
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def admin(url: str, *statements: str) -> None:
    """Run ``statements`` in order on one connection to ``url``."""
    import asyncpg

    conn = await asyncpg.connect(plain(url))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def create_schema(database_url: str) -> tuple[str, str]:
    """A new role and its schema in the database of ``database_url`` (an admin's URL):
    ``(role, url)``, the URL connecting as that role."""
    url = make_url(database_url)
    role = f"soorma_t_{uuid.uuid4().hex[:16]}"
    password = ""
    if url.password:
        secret = str(url.password).replace("'", "''")
        password = f" PASSWORD '{secret}'"
    await admin(
        database_url,
        f'CREATE ROLE "{role}" SUPERUSER LOGIN{password}',
        f'ALTER ROLE "{role}" SET search_path TO "{role}"',
        f'CREATE SCHEMA "{role}" AUTHORIZATION "{role}"',
    )
    return role, url.set(username=role).render_as_string(hide_password=False)


async def drop_schema(database_url: str, role: str) -> None:
    """End the role's connections, then drop everything it owns, and the role."""
    await admin(
        database_url,
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'",
        f'DROP OWNED BY "{role}" CASCADE',
        f'DROP ROLE "{role}"',
    )
