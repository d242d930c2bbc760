"""What differs between SQLite and PostgreSQL for long-term memory: vectors, JSON,
timestamps, keyword search and the per-transaction tenant wall."""

from __future__ import annotations

import math
import re
import sqlite3
from array import array
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

_WORD = re.compile(r"\w+", re.UNICODE)


def keyword_terms(query: str) -> list[str]:
    """The words of a query, as both engines' keyword search sees them."""
    return _WORD.findall(query.lower())[:64]


class Dialect:
    """SQL fragments and parameter encodings of one engine."""

    pg = False

    def vector_param(self, vector: Sequence[float]) -> Any:
        raise NotImplementedError

    def vector_value(self, name: str) -> str:
        """SQL for a vector bind parameter ``:name`` in an INSERT/UPDATE."""
        raise NotImplementedError

    def distance(self, dims: int, name: str = "q") -> str:
        """Cosine distance between the row's ``embedding`` and ``:name`` (0 = same)."""
        raise NotImplementedError

    def json_param(self, value: Any) -> str:
        return orjson.dumps(value).decode()

    def in_values(self, column: str, name: str) -> str:
        """``column`` is one of the strings in list parameter ``:name`` (one statement
        for any number of values, so the driver prepares it once)."""
        raise NotImplementedError

    def values_param(self, values: Sequence[str]) -> Any:
        raise NotImplementedError

    def json_value(self, name: str) -> str:
        return f":{name}"

    def ts(self, value: datetime) -> Any:
        return value

    def tags_all(self, tags: list[str], params: dict[str, Any], alias: str = "") -> str:
        """Every tag in ``tags`` is among the row's tags (``alias``: table prefix)."""
        raise NotImplementedError

    def metadata_equals(
        self, metadata: dict[str, Any], params: dict[str, Any], alias: str = ""
    ) -> str:
        """Each top-level metadata field equals the given value, type included."""
        raise NotImplementedError


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
