"""What differs between SQLite and PostgreSQL for long-term memory: vectors, JSON,
timestamps, keyword search and the per-transaction tenant wall."""

from __future__ import annotations

import asyncio
import logging
import math
import re
import sqlite3
import threading
from abc import ABC, abstractmethod
from array import array
from collections import namedtuple
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

_WORD = re.compile(r"\w+", re.UNICODE)
log = logging.getLogger("memory_service.longterm")


def keyword_terms(query: str) -> list[str]:
    """The words of a query, as both engines' keyword search sees them."""
    return _WORD.findall(query.lower())[:64]


class Dialect(ABC):
    """SQL fragments and parameter encodings of one engine (one subclass per engine)."""

    pg = False

    @abstractmethod
    def vector_param(self, vector: Sequence[float]) -> Any: ...

    @abstractmethod
    def vector_value(self, name: str) -> str:
        """SQL for a vector bind parameter ``:name`` in an INSERT/UPDATE."""

    @abstractmethod
    def distance(self, dims: int, name: str = "q") -> str:
        """Cosine distance between the row's ``embedding`` and ``:name`` (0 = same)."""

    def json_param(self, value: Any) -> str:
        return orjson.dumps(value).decode()

    @abstractmethod
    def in_values(self, column: str, name: str) -> str:
        """``column`` is one of the strings in list parameter ``:name`` (one statement
        for any number of values, so the driver prepares it once)."""

    @abstractmethod
    def values_param(self, values: Sequence[str]) -> Any: ...

    def json_value(self, name: str) -> str:
        return f":{name}"

    def ts(self, value: datetime) -> Any:
        return value

    @abstractmethod
    def tags_all(self, tags: list[str], params: dict[str, Any], alias: str = "") -> str:
        """Every tag in ``tags`` is among the row's tags (``alias``: table prefix)."""

    @abstractmethod
    def metadata_equals(
        self, metadata: dict[str, Any], params: dict[str, Any], alias: str = ""
    ) -> str:
        """Each top-level metadata field equals the given value, type included."""


class SqliteDialect(Dialect):
    def vector_param(self, vector: Sequence[float]) -> Any:
        return array("f", vector).tobytes()

    def vector_value(self, name: str) -> str:
        return f":{name}"

    def distance(self, dims: int, name: str = "q") -> str:
        return f"vec_distance_cosine(embedding, :{name})"

    def in_values(self, column: str, name: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(:{name}))"

    def values_param(self, values: Sequence[str]) -> Any:
        return orjson.dumps(list(values)).decode()

    def ts(self, value: datetime) -> Any:
        # Fixed-width ISO strings in UTC: text order is time order.
        return value.astimezone(UTC).isoformat(timespec="microseconds")

    def tags_all(self, tags: list[str], params: dict[str, Any], alias: str = "") -> str:
        parts = []
        for i, tag in enumerate(tags):
            params[f"tag{i}"] = tag
            parts.append(f"EXISTS (SELECT 1 FROM json_each({alias}tags) WHERE value = :tag{i})")
        return " AND ".join(parts)

    def metadata_equals(
        self, metadata: dict[str, Any], params: dict[str, Any], alias: str = ""
    ) -> str:
        parts = []
        for i, (key, value) in enumerate(metadata.items()):
            params[f"mk{i}"] = f'$."{key}"'
            params[f"mv{i}"] = int(value) if isinstance(value, bool) else value
            # json_type keeps true from matching 1 and "1" from matching 1.
            kind = (
                "('true','false')"
                if isinstance(value, bool)
                else "('text')"
                if isinstance(value, str)
                else "('integer','real')"
            )
            parts.append(
                f"(json_extract({alias}metadata, :mk{i}) = :mv{i} "
                f"AND json_type({alias}metadata, :mk{i}) IN {kind})"
            )
        return " AND ".join(parts)


class PostgresDialect(Dialect):
    pg = True

    def vector_param(self, vector: Sequence[float]) -> Any:
        # A real[] in asyncpg's binary format (pgvector casts it): formatting and parsing
        # 256 numbers as text took longer than the insert itself.
        return vector if isinstance(vector, list) else list(vector)

    def vector_value(self, name: str) -> str:
        return f"CAST(CAST(:{name} AS real[]) AS vector)"

    def distance(self, dims: int, name: str = "q") -> str:
        # The same expression as the per-model HNSW index, so the planner can use it.
        return f"(embedding::vector({dims}) <=> CAST(CAST(:{name} AS real[]) AS vector({dims})))"

    def in_values(self, column: str, name: str) -> str:
        # The column's own type, so its btree index applies (content_hash is CHAR).
        kind = "bpchar[]" if column.endswith("content_hash") else "text[]"
        return f"{column} = ANY(CAST(:{name} AS {kind}))"

    def values_param(self, values: Sequence[str]) -> Any:
        return list(values)

    def json_value(self, name: str) -> str:
        return f"CAST(CAST(:{name} AS text) AS jsonb)"

    def tags_all(self, tags: list[str], params: dict[str, Any], alias: str = "") -> str:
        params["tags_all"] = orjson.dumps(tags).decode()
        return f"{alias}tags @> CAST(CAST(:tags_all AS text) AS jsonb)"

    def metadata_equals(
        self, metadata: dict[str, Any], params: dict[str, Any], alias: str = ""
    ) -> str:
        params["meta_eq"] = orjson.dumps(metadata).decode()
        return f"{alias}metadata @> CAST(CAST(:meta_eq AS text) AS jsonb)"


def dialect_for(engine: AsyncEngine) -> Dialect:
    return PostgresDialect() if engine.dialect.name == "postgresql" else SqliteDialect()


def _cosine_distance(
    a: bytes | None,
    b: bytes | None,
    _frombuffer: Any = np.frombuffer,
    _dot: Any = np.dot,
    _float32: Any = np.float32,
) -> float | None:
    # Called once per candidate row: module lookups are bound as defaults.
    if a is None or b is None or len(a) != len(b):
        return None
    x = _frombuffer(a, _float32)
    y = _frombuffer(b, _float32)
    norm = math.sqrt(float(_dot(x, x)) * float(_dot(y, y)))
    if norm == 0.0:
        return None
    return 1.0 - float(_dot(x, y)) / norm


async def _load_vector_functions(conn: Any) -> None:
    # sqlite-vec when this Python's sqlite3 can load extensions (many builds cannot:
    # pyenv's default, macOS' system Python); otherwise the same function in Python.
    try:
        import sqlite_vec

        await conn.enable_load_extension(True)
        await conn.load_extension(sqlite_vec.loadable_path())
        await conn.enable_load_extension(False)
    except (AttributeError, ImportError, sqlite3.Error):
        await conn.create_function("vec_distance_cosine", 2, _cosine_distance, deterministic=True)


def install_sqlite_vectors(engine: AsyncEngine) -> None:
    """Give every SQLite connection of ``engine`` ``vec_distance_cosine`` (call before use)."""

    @event.listens_for(engine.sync_engine, "connect")
    def _vectors(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.run_async(_load_vector_functions)


class SqliteVecReader:
    """Vector ranking on SQLite computed by sqlite-vec (C), through APSW.

    Many Python builds' ``sqlite3`` cannot load extensions (pyenv's default, macOS'
    system Python), so their connections get ``vec_distance_cosine`` from Python: exact,
    but ~6 µs a row. APSW ships its own SQLite that can load sqlite-vec; this reader
    opens its own connections to the same database file (WAL: readers see every
    committed write) and runs the ranking statements there, in worker threads (APSW
    releases the GIL while SQLite runs). Only reads go through it; writes stay on the
    engine.
    """

    WORKERS = 2

    def __init__(self, path: str, extension: str) -> None:
        self._path = path
        self._extension = extension
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(self.WORKERS, thread_name_prefix="sqlite-vec")
        self._rows: dict[tuple[str, ...], Any] = {}
        self._connections: list[Any] = []
        self._lock = threading.Lock()

    @classmethod
    def open(cls, engine: AsyncEngine) -> SqliteVecReader | None:
        """A reader for ``engine``'s database file, or None (in-memory database, or
        APSW or sqlite-vec not installed or not loadable here)."""
        database = engine.url.database
        if engine.dialect.name != "sqlite" or not database or database == ":memory:":
            return None
        if database.startswith("file:") or engine.url.query.get("mode") == "memory":
            return None
        try:
            import apsw
            import sqlite_vec

            reader = cls(database, sqlite_vec.loadable_path())
            reader._connection()  # loads the extension now: fail here, not per query
            del apsw
        except Exception as exc:  # ImportError, or the extension would not load
            log.info("sqlite-vec unavailable through APSW (%s): vector distance in Python", exc)
            return None
        log.info("vector distance on SQLite: sqlite-vec through APSW")
        return reader

    def _connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            import apsw

            conn = apsw.Connection(self._path)
            conn.set_busy_timeout(30_000)
            conn.enable_load_extension(True)
            conn.load_extension(self._extension)
            conn.enable_load_extension(False)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _run(self, sql: str, params: dict[str, Any]) -> list[Any]:
        cursor = self._connection().cursor()
        # Unused names are harmless in SQLAlchemy but an error in APSW.
        names = set(re.findall(r"(?<!:):(\w+)", sql))
        cursor.execute(sql, {k: v for k, v in params.items() if k in names})
        try:
            columns = tuple(name for name, _ in cursor.getdescription())
        except Exception:  # apsw.ExecutionCompleteError: no rows at all
            return []
        rows = list(cursor)
        row_type = self._rows.get(columns)
        if row_type is None:
            row_type = self._rows[columns] = namedtuple("Row", columns)  # type: ignore[misc]
        return [row_type(*row) for row in rows]

    async def fetch(self, sql: str, params: dict[str, Any]) -> list[Any]:
        """Rows of a read-only statement (``:name`` parameters), attribute access by
        column name like SQLAlchemy's rows."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._run, sql, params)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
