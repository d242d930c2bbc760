"""SQL storage of long-term memory, one code path for SQLite and PostgreSQL.

Every method takes the caller's ``tenant`` (and ``user``) first and puts them in its SQL;
on PostgreSQL each transaction also sets ``soorma.tenant_id`` and switches to the
non-login role of the row-level-security policy, so a statement that forgot the tenant
still sees only the tenant's rows. Vectors arrive computed (see
:mod:`memory_service.longterm.service`); only rows on the active model and dimension
take part in vector ranking.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memory_service.longterm.dialect import (
    Dialect,
    SqliteVecReader,
    dialect_for,
    keyword_terms,
)
from memory_service.longterm.keywords import (
    COMMON_TERM_SHARE,
    KEYWORD_SAMPLE,
    keyword_ranking,
)
from memory_service.longterm.schema import (
    ALL_TENANTS,
    RLS_ROLE,
    SEARCH_FUNCTION,
    TENANT_SETTING,
    create_schema,
    pgvector_available,
    static_search_function,
    tables_exist,
)
from memory_service.longterm.segments import (
    Cover,
    SegmentIndex,
    model_tag,
    ranking_sql,
    static_name,
)
from soorma_common.errors import MemoryNotFound, VectorSearchUnavailable
from soorma_common.knowledge import (
    EpisodeCreate,
    EpisodeRecord,
    ProcedureCreate,
    ProcedureRecord,
    SemanticMemoryCreate,
    SemanticMemoryRecord,
    content_hash,
)

log = logging.getLogger("memory_service.longterm.store")

SEMANTIC_COLUMNS = (
    "id, external_id, parent_external_id, chunk_index, content, metadata, tags, source, "
    "is_public, user_id, content_hash, embedding_model, created_at, updated_at"
)
EPISODE_COLUMNS = (
    "id, agent_id, user_id, role, content, metadata, session_id, plan_id, created_at, "
    "embedding_model"
)
PROCEDURE_COLUMNS = (
    "id, agent_id, user_id, kind, content, situation, metadata, tags, is_public, "
    "created_at, updated_at, embedding_model"
)
# Text each table embeds (re-embedding reads it back).
EMBEDDED_TEXT = {
    "memory_semantic": "content",
    "memory_episodes": "content",
    "memory_procedures": "situation",
}
AGE_COLUMN = {
    "memory_semantic": "updated_at",
    "memory_episodes": "created_at",
    "memory_procedures": "updated_at",
}


@dataclass(frozen=True, slots=True)
class ActiveModel:
    """The model new vectors come from; only rows on it are ranked by vector."""

    name: str
    dims: int


@dataclass(frozen=True, slots=True)
class Ranked:
    id: str
    value: float  # cosine similarity (vector) or keyword relevance


# Connections of the vector searches' own pool (LongTermStore._search_pool).
SEARCH_POOL_SIZE = 10


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The search pool's reset: nothing to undo (asyncpg's default, ``RESET ALL`` among
    others, is one more round trip per search and would drop the session's RLS role).
    A search's settings are local to its statement's transaction; one left open by a
    failure is rolled back."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


def _loads(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _dt(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def semantic_record(row: Any) -> SemanticMemoryRecord:
    return SemanticMemoryRecord(
        id=row.id,
        external_id=row.external_id,
        parent_external_id=row.parent_external_id,
        chunk_index=row.chunk_index,
        content=row.content,
        metadata=_loads(row.metadata),
        tags=_loads(row.tags),
        source=row.source,
        public=bool(row.is_public),
        user_id=row.user_id,
        content_hash=row.content_hash.strip(),
        embedding_model=row.embedding_model,
        created_at=_dt(row.created_at),
        updated_at=_dt(row.updated_at),
    )


def semantic_fields_from_pg(row: Any) -> dict[str, Any]:
    """A record's fields from an asyncpg row of the search function, in the order of
    :class:`SemanticMemoryRecord`'s fields (so ``orjson.dumps`` with ``OPT_UTC_Z`` writes
    what the model's serializer writes)."""
    return {
        "id": row["id"],
        "external_id": row["external_id"],
        "parent_external_id": row["parent_external_id"],
        "chunk_index": row["chunk_index"],
        "content": row["content"],
        "metadata": _loads(row["metadata"]),
        "tags": _loads(row["tags"]),
        "source": row["source"],
        "public": row["is_public"],
        "user_id": row["user_id"],
        "content_hash": row["content_hash"].strip(),
        "embedding_model": row["embedding_model"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def semantic_record_from_pg(row: Any) -> SemanticMemoryRecord:
    """A record from an asyncpg row of the search function (validated: pydantic's
    validator takes a quarter of the time ``model_construct`` does)."""
    return SemanticMemoryRecord(**semantic_fields_from_pg(row))


# The search function's rows (schema.SEARCH_FUNCTION): SEMANTIC_COLUMNS and the distance.
_SEARCH_ROW = (
    "id varchar, external_id varchar, parent_external_id varchar, chunk_index integer, "
    "content text, metadata jsonb, tags jsonb, source varchar, is_public boolean, "
    "user_id varchar, content_hash bpchar, embedding_model varchar, "
    "created_at timestamptz, updated_at timestamptz, distance double precision"
)
_SEARCH_CALL = f"SELECT * FROM {SEARCH_FUNCTION}($1, $2, $3, $4, $5, $6) AS h({_SEARCH_ROW})"
_BIND = re.compile(r"(?<!:):(\w+)")
# Most search statements kept built (distinct covers and filter shapes in use).
_SEARCH_STATEMENTS = 256


@dataclass(frozen=True, slots=True)
class _SearchStatement:
    """A vector ranking over one cover and query shape, built once: the generated
    function's ``name`` and ``CREATE`` statement (None: cannot be generated), the
    ranking for SEARCH_FUNCTION (``$1`` vector, ``$2`` parameters) and the parameter
    names in the order both read them."""

    name: str
    create: str | None
    dynamic: str
    names: tuple[str, ...]


def positional(
    sql: str,
    params: dict[str, Any],
    vector: str = "q",
    *,
    refs: tuple[str, str] = ("$1", "$2"),
) -> tuple[str, list[str | None]]:
    """``sql`` with its ``:name`` parameters as the search function's: ``:q`` (the
    vector) as ``refs[0]``, every other one as ``refs[1][i]``, a text (its uses cast
    it)."""
    out, names = _positional(sql, vector, refs)
    return out, _args(params, names)


def _positional(sql: str, vector: str, refs: tuple[str, str]) -> tuple[str, tuple[str, ...]]:
    names: list[str] = []

    def place(match: re.Match[str]) -> str:
        name = match[1]
        if name == vector:
            return refs[0]
        if name not in names:
            names.append(name)
        return f"{refs[1]}[{names.index(name) + 1}]"

    return _BIND.sub(place, sql), tuple(names)


def _args(params: dict[str, Any], names: Sequence[str]) -> list[str | None]:
    return [None if params[n] is None else str(params[n]) for n in names]


def episode_record(row: Any) -> EpisodeRecord:
    return EpisodeRecord(
        id=row.id,
        agent_id=row.agent_id,
        user_id=row.user_id,
        role=row.role,
        content=row.content,
        metadata=_loads(row.metadata),
        session_id=row.session_id,
        plan_id=row.plan_id,
        created_at=_dt(row.created_at),
        embedding_model=row.embedding_model,
    )


def procedure_record(row: Any) -> ProcedureRecord:
    return ProcedureRecord(
        id=row.id,
        agent_id=row.agent_id,
        user_id=row.user_id,
        kind=row.kind,
        content=row.content,
        situation=row.situation,
        metadata=_loads(row.metadata),
        tags=_loads(row.tags),
        public=bool(row.is_public),
        created_at=_dt(row.created_at),
        updated_at=_dt(row.updated_at),
        embedding_model=row.embedding_model,
    )


def _on_model(model: ActiveModel, alias: str = "") -> str:
    """Rows on ``model``, as literals: a partial HNSW index is only usable when the
    planner can match its predicate, which a generic plan's parameters would not."""
    name = model.name.replace("'", "''")
    return f"{alias}embedding_model = '{name}' AND {alias}embedding_dims = {int(model.dims)}"


class _Clock:
    """UTC now, strictly increasing within the process (recent-N order has no ties)."""

    def __init__(self) -> None:
        self._last = datetime.min.replace(tzinfo=UTC)

    def now(self) -> datetime:
        current = datetime.now(UTC)
        if current <= self._last:
            current = self._last + timedelta(microseconds=1)
        self._last = current
        return current


class LongTermStore:
    """Semantic, episodic and procedural records on an injected engine (already migrated)."""

    # Most records matching a keyword query that are ranked by relevance (see
    # semantic_candidates).
    KEYWORD_CANDIDATES = 500
    # Words in more than COMMON_TERM_SHARE of a sample of KEYWORD_SAMPLE records in a
    # search's scope are left out of its keyword query (memory_service.longterm.keywords).
    KEYWORD_SAMPLE = KEYWORD_SAMPLE
    COMMON_TERM_SHARE = COMMON_TERM_SHARE

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        available: bool,
        rls_role: bool,
        vectors: SqliteVecReader | None = None,
        segments: SegmentIndex | None = None,
    ) -> None:
        self.engine = engine
        # PostgreSQL: the semantic vectors' segment indexes (built in bulk).
        self.segments = segments
        # SQLite: vector ranking through sqlite-vec when it can be loaded (see
        # SqliteVecReader); otherwise on the engine's connections.
        self.vectors = vectors
        self.d: Dialect = dialect_for(engine)
        self.available = available
        self._rls_role = rls_role
        self._clock = _Clock()
        self._statements: dict[str, TextClause] = {}
        # Generated search functions this process created (segments.static_name).
        self._static_searches: set[str] = set()
        # Search statements built per cover and query shape (_search_statement).
        self._search_statements: dict[tuple[Any, ...], _SearchStatement] = {}
        self._static_allowed = True
        # PostgreSQL vector searches' own asyncpg pool (_search_pool), opened on first use.
        self._searches: asyncpg.Pool | None = None
        self._searches_opening = asyncio.Lock()
        self._semantic_upsert = self._semantic_insert(
            "ON CONFLICT (tenant_id, user_id, external_id) WHERE external_id IS NOT NULL "
            "DO UPDATE SET content = excluded.content, content_hash = excluded.content_hash, "
            "metadata = excluded.metadata, tags = excluded.tags, source = excluded.source, "
            "is_public = excluded.is_public, embedding = excluded.embedding, "
            "embedding_model = excluded.embedding_model, "
            "embedding_dims = excluded.embedding_dims, updated_at = excluded.updated_at"
        )
        self._semantic_dedupe = self._semantic_insert(
            "ON CONFLICT (tenant_id, user_id, content_hash) WHERE external_id IS NULL DO NOTHING"
        )

    @classmethod
    async def open(cls, engine: AsyncEngine, **segments: Any) -> LongTermStore:
        """Check (PostgreSQL: create if pgvector appeared since migrating) the tables.
        ``segments``: :class:`SegmentIndex` settings (PostgreSQL)."""
        if engine.dialect.name != "postgresql":
            return cls(engine, available=True, rls_role=False, vectors=SqliteVecReader.open(engine))
        async with engine.begin() as conn:
            if not await conn.run_sync(tables_exist):
                if not await conn.run_sync(pgvector_available):
                    return cls(engine, available=False, rls_role=False)
                await conn.run_sync(create_schema)
            role = (
                await conn.execute(
                    text(
                        "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :r) "
                        "AND pg_has_role(current_user, :r, 'MEMBER')"
                    ),
                    {"r": RLS_ROLE},
                )
            ).scalar()
        return cls(
            engine,
            available=True,
            rls_role=bool(role),
            segments=SegmentIndex(engine, **segments),
        )

    async def prepare_model(self, model: ActiveModel) -> None:
        """PostgreSQL: an HNSW index for ``model``'s procedure vectors (built once, kept
        after); semantic vectors are indexed by segments (see :meth:`start_indexing`)."""
        if not (self.d.pg and self.available):
            return
        tag = hashlib.sha256(f"{model.name}@{model.dims}".encode()).hexdigest()[:12]
        literal = model.name.replace("'", "''")
        predicate = f"embedding_model = '{literal}' AND embedding_dims = {model.dims}"
        async with self.engine.begin() as conn:
            for table in ("memory_procedures",):
                await conn.execute(
                    text(
                        f"CREATE INDEX IF NOT EXISTS ix_{table}_hnsw_{tag} ON {table} "
                        f"USING hnsw ((embedding::vector({model.dims})) vector_cosine_ops) "
                        f"WHERE {predicate}"
                    )
                )

    def start_indexing(self, model: ActiveModel) -> None:
        """PostgreSQL: start the builder of ``model``'s semantic segment indexes."""
        if self.segments is not None and self.available:
            self.segments.start(model.name, model.dims)

    async def stop_indexing(self) -> None:
        if self.segments is not None:
            await self.segments.stop()

    def close(self) -> None:
        if self.vectors is not None:
            self.vectors.close()

    async def close_searches(self) -> None:
        """Close the vector searches' pool (:meth:`_search_pool`), if it was opened."""
        pool, self._searches = self._searches, None
        if pool is not None:
            await pool.close()

    async def _search_pool(self) -> asyncpg.Pool:
        """The pool pure vector searches run on: asyncpg's own, on the engine's connect
        arguments (a SQLAlchemy checkout and return went through greenlets: about a
        tenth of the service's CPU per search, B8). Its connections stay in the RLS role
        for the whole session (set when a connection opens, never reset: the pool's
        reset is a no-op), so a search does not switch roles per call; they are used
        only for the generated search functions, whose tenant setting is local to the
        statement's transaction, and for reading the catalog (pg_class, pg_index)."""
        if self._searches is not None:
            return self._searches
        async with self._searches_opening:
            if self._searches is None:
                cargs, cparams = self.engine.dialect.create_connect_args(self.engine.url)
                for key in ("prepared_statement_cache_size", "prepared_statement_name_func"):
                    cparams.pop(key, None)
                cparams.setdefault("timeout", 30)
                self._searches = await asyncpg.create_pool(
                    *cargs,
                    min_size=0,
                    max_size=SEARCH_POOL_SIZE,
                    init=self._init_search_connection,
                    reset=_keep_session,
                    **cparams,
                )
        assert self._searches is not None
        return self._searches

    async def _init_search_connection(self, conn: asyncpg.Connection) -> None:
        if self._rls_role:
            await conn.execute(f"SET ROLE {RLS_ROLE}")

    async def _ranked(self, conn: AsyncConnection, sql: str, params: dict[str, Any]) -> list[Any]:
        """Rows of a vector-ranking statement: through sqlite-vec when available."""
        if self.vectors is not None:
            return await self.vectors.fetch(sql, params)
        return list((await conn.execute(self._sql(sql), params)).all())

    def require_available(self) -> None:
        if not self.available:
            raise VectorSearchUnavailable(
                "pgvector not installed: this PostgreSQL has no 'vector' extension, so "
                "semantic, episodic and procedural memory are unavailable; install "
                "pgvector and restart the memory service",
                details={"extension": "vector"},
            )

    def _settings(self, tenant_sql: str, search_k: int) -> str:
        """The per-transaction settings (tenant, RLS role, HNSW tuning) as one SELECT."""
        role = f", set_config('role', '{RLS_ROLE}', true)" if self._rls_role else ""
        tuning = ""
        if search_k:
            # Filtered HNSW scans keep going until enough rows pass the filters.
            tuning = (
                ", set_config('hnsw.iterative_scan', 'relaxed_order', true)"
                f", set_config('hnsw.ef_search', '{max(40, min(search_k, 1000))}', true)"
            )
        return f"SELECT set_config('{TENANT_SETTING}', {tenant_sql}, true){role}{tuning}"

    @asynccontextmanager
    async def _tx(self, tenant: str, *, search_k: int = 0) -> AsyncIterator[AsyncConnection]:
        self.require_available()
        async with self.engine.begin() as conn:
            if self.d.pg:
                await conn.execute(self._sql(self._settings(":t", search_k)), {"t": tenant})
            yield conn

    @asynccontextmanager
    async def _read(self, tenant: str, *, search_k: int = 0) -> AsyncIterator[AsyncConnection]:
        """A read-only transaction for searches.

        PostgreSQL: ``BEGIN`` and the settings go in one simple-query message (one round
        trip, where SQLAlchemy's transaction takes two): under load each round trip's
        socket writes were the largest part of a search's CPU in the service. The
        connection runs in autocommit mode meanwhile so SQLAlchemy sends no ``BEGIN`` of
        its own; statements run inside this transaction all the same.
        """
        if not self.d.pg:
            async with self._tx(tenant, search_k=search_k) as conn:
                yield conn
            return
        self.require_available()
        async with self.engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            raw = (await conn.get_raw_connection()).driver_connection
            assert raw is not None
            literal = "'" + tenant.replace("'", "''") + "'"
            await raw.execute(f"BEGIN READ ONLY; {self._settings(literal, search_k)}")
            try:
                yield conn
            except BaseException:
                try:
                    await raw.execute("ROLLBACK")
                except Exception:
                    # Never back to the pool inside a transaction.
                    await conn.invalidate()
                raise
            await raw.execute("COMMIT")

    def _by_distance(self, distance: str) -> str:
        # PostgreSQL needs the indexed expression itself to order by the HNSW index;
        # SQLite would evaluate the expression a second time, the alias reuses it.
        return distance if self.d.pg else "distance"

    def new_id(self) -> str:
        return str(uuid.uuid4())

    # --- semantic -------------------------------------------------------------------------

    def _semantic_params(
        self,
        tenant: str,
        user: str,
        item: SemanticMemoryCreate,
        vector: Sequence[float],
        model: ActiveModel,
        now: datetime,
        *,
        external_id: str | None,
        parent: str | None = None,
        chunk_index: int | None = None,
    ) -> dict[str, Any]:
        return {
            "id": self.new_id(),
            "t": tenant,
            "u": user,
            "external_id": external_id,
            "parent": parent,
            "chunk_index": chunk_index,
            "content": item.content,
            "hash": content_hash(item.content),
            "metadata": self.d.json_param(item.metadata),
            "tags": self.d.json_param(item.tags),
            "item": item,
            "source": item.source,
            "public": item.public,
            "emb": self.d.vector_param(vector),
            "model": model.name,
            "dims": model.dims,
            "now": self.d.ts(now),
        }

    def _semantic_insert(self, conflict: str) -> str:
        d = self.d
        return (
            "INSERT INTO memory_semantic (id, tenant_id, user_id, external_id, "
            "parent_external_id, chunk_index, content, content_hash, metadata, tags, source, "
            "is_public, embedding, embedding_model, embedding_dims, created_at, updated_at) "
            f"VALUES (:id, :t, :u, :external_id, :parent, :chunk_index, :content, :hash, "
            f"{d.json_value('metadata')}, {d.json_value('tags')}, :source, :public, "
            f"{d.vector_value('emb')}, :model, :dims, :now, :now) {conflict}"
        )

    async def semantic_put(
        self,
        tenant: str,
        user: str,
        items: Sequence[SemanticMemoryCreate],
        vectors: Sequence[Sequence[float]],
        model: ActiveModel,
    ) -> list[tuple[SemanticMemoryRecord, bool]]:
        """Store ``items`` in one transaction: upsert by external id, else de-duplicate.

        Set-based, a fixed number of statements per batch whatever its size: the stored
        external ids and content hashes are looked up with one statement each, the rows
        written with one ``executemany`` per kind, and the keys looked up again to learn
        what each row became (a concurrent writer may have stored the same content
        first). Records are built from what was written; only rows stored by someone
        else (de-duplicated content, a lost race) are read back. Returns each item's
        record and whether it was created (False: updated in place, or the same content
        was already stored).
        """
        now = self._clock.now()
        rows = [
            self._semantic_params(
                tenant, user, item, vector, model, now, external_id=item.external_id
            )
            for item, vector in zip(items, vectors, strict=True)
        ]
        keyed = [row for row in rows if row["external_id"] is not None]
        hashed = [row for row in rows if row["external_id"] is None]
        # The last write of an external id in the batch is what stays stored.
        last_keyed = {row["external_id"]: row for row in keyed}
        async with self._tx(tenant) as conn:
            known_external = await self._semantic_keys(
                conn, tenant, user, "external_id", last_keyed
            )
            known_hash = await self._semantic_keys(
                conn, tenant, user, "content_hash", {r["hash"] for r in hashed}
            )
            # New content only, once per hash (a batch may repeat itself).
            fresh = list(
                {r["hash"]: r for r in reversed(hashed) if r["hash"] not in known_hash}.values()
            )
            if keyed:
                await conn.execute(self._sql(self._semantic_upsert), keyed)
            if fresh:
                await conn.execute(self._sql(self._semantic_dedupe), fresh)
            by_external = await self._semantic_keys(conn, tenant, user, "external_id", last_keyed)
            by_hash = dict(known_hash)
            if fresh:
                by_hash.update(
                    await self._semantic_keys(
                        conn, tenant, user, "content_hash", {r["hash"] for r in fresh}
                    )
                )
            written = {r["id"]: r for r in fresh}
            for row in last_keyed.values():
                record_id, created_at = by_external[row["external_id"]]
                written[record_id] = {**row, "id": record_id, "created_at": created_at}
            # Everything else (stored before, or by a concurrent writer) is read back.
            others = {rid for rid, _ in by_hash.values() if rid not in written}
            stored = await self._semantic_by_ids(conn, tenant, others)
        built = {rid: self._semantic_built(row, model) for rid, row in written.items()}
        out: list[tuple[SemanticMemoryRecord, bool]] = []
        seen: set[str] = set()
        for row in rows:
            if row["external_id"] is not None:
                record_id = by_external[row["external_id"]][0]
                created = row["external_id"] not in known_external and record_id not in seen
            else:
                record_id = by_hash[row["hash"]][0]
                created = row["hash"] not in known_hash and record_id not in seen
            seen.add(record_id)
            record = built.get(record_id) or stored[record_id]
            out.append((record, created and record_id in built))
        return out

    def _semantic_built(self, row: dict[str, Any], model: ActiveModel) -> SemanticMemoryRecord:
        """The record a row written by :meth:`semantic_put` now is (no read-back)."""
        created_at = row.get("created_at", row["now"])
        return SemanticMemoryRecord.model_construct(
            id=row["id"],
            external_id=row["external_id"],
            parent_external_id=None,
            chunk_index=None,
            content=row["content"],
            metadata=row["item"].metadata,
            tags=row["item"].tags,
            source=row["source"],
            public=bool(row["public"]),
            user_id=row["u"],
            content_hash=row["hash"],
            embedding_model=model.name,
            created_at=_dt(created_at),
            updated_at=_dt(row["now"]),
        )

    def _sql(self, statement: str) -> TextClause:
        """``text(statement)``, built once (parsing bind names shows up per batch)."""
        clause = self._statements.get(statement)
        if clause is None:
            clause = self._statements[statement] = text(statement)
        return clause

    async def _semantic_keys(
        self, conn: AsyncConnection, tenant: str, user: str, column: str, values: Iterable[str]
    ) -> dict[str, tuple[str, Any]]:
        """``(id, created_at)`` of the user's records whose ``column`` (external id or
        content hash) is in ``values``, by that value (the oldest for a hash stored more
        than once)."""
        ordered = sorted(values)
        if not ordered:
            return {}
        result = await conn.execute(
            self._sql(
                f"SELECT {column} AS k, id, created_at FROM memory_semantic WHERE "
                f"tenant_id = :t AND user_id = :u AND {self.d.in_values(column, 'vals')} "
                "ORDER BY created_at DESC, id DESC"
            ),
            {"t": tenant, "u": user, "vals": self.d.values_param(ordered)},
        )
        # Newest first: the oldest is written last and wins. (CHAR pads on PostgreSQL.)
        if column == "content_hash":
            return {row.k.strip(): (row.id, row.created_at) for row in result}
        return {row.k: (row.id, row.created_at) for row in result}

    async def _semantic_by_ids(
        self, conn: AsyncConnection, tenant: str, ids: Iterable[str]
    ) -> dict[str, SemanticMemoryRecord]:
        wanted = sorted(ids)
        if not wanted:
            return {}
        if self.d.pg:
            sql = (
                f"SELECT {SEMANTIC_COLUMNS} FROM memory_semantic WHERE tenant_id = :t "
                f"AND {self.d.in_values('id', 'ids')}"
            )
        else:
            # The ids drive the join (CROSS JOIN keeps SQLite's order): with
            # "tenant_id = ? AND id IN (json_each)" SQLite scanned the tenant's rows
            # (124 ms at 100,000) instead of looking the ids up.
            columns = ", ".join(f"s.{c}" for c in SEMANTIC_COLUMNS.split(", "))
            sql = (
                f"SELECT {columns} FROM json_each(:ids) j CROSS JOIN memory_semantic s "
                "WHERE s.id = j.value AND s.tenant_id = :t"
            )
        result = await conn.execute(
            self._sql(sql), {"t": tenant, "ids": self.d.values_param(wanted)}
        )
        return {row.id: semantic_record(row) for row in result}

    async def semantic_replace_document(
        self,
        tenant: str,
        user: str,
        parent: str,
        chunks: Sequence[SemanticMemoryCreate],
        vectors: Sequence[Sequence[float]],
        model: ActiveModel,
    ) -> list[SemanticMemoryRecord]:
        """Replace every chunk of document ``parent`` with ``chunks``, atomically."""
        now = self._clock.now()
        rows = [
            self._semantic_params(
                tenant,
                user,
                chunk,
                vector,
                model,
                now,
                external_id=f"{parent}#{i}",
                parent=parent,
                chunk_index=i,
            )
            for i, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True))
        ]
        async with self._tx(tenant) as conn:
            await conn.execute(
                text(
                    "DELETE FROM memory_semantic WHERE tenant_id = :t AND user_id = :u AND "
                    "(parent_external_id = :p OR external_id = :p)"
                ),
                {"t": tenant, "u": user, "p": parent},
            )
            if rows:
                await conn.execute(text(self._semantic_insert("")), rows)
            result = await conn.execute(
                text(
                    f"SELECT {SEMANTIC_COLUMNS} FROM memory_semantic WHERE tenant_id = :t AND "
                    "user_id = :u AND parent_external_id = :p ORDER BY chunk_index"
                ),
                {"t": tenant, "u": user, "p": parent},
            )
            return [semantic_record(row) for row in result]

    async def _get_visible(
        self, table: str, columns: str, tenant: str, user: str, record_id: str, what: str
    ) -> Any:
        """The row ``record_id`` of ``table`` that ``user`` may read (own or public)."""
        async with self._tx(tenant) as conn:
            row = (
                await conn.execute(
                    text(
                        f"SELECT {columns} FROM {table} WHERE tenant_id = :t "
                        "AND id = :id AND (user_id = :u OR is_public)"
                    ),
                    {"t": tenant, "u": user, "id": record_id},
                )
            ).first()
        if row is None:
            raise MemoryNotFound(f"{what} {record_id!r} not found")
        return row

    async def _delete_own(
        self, table: str, tenant: str, user: str, record_id: str, what: str
    ) -> None:
        """Delete ``user``'s own row ``record_id`` of ``table`` (404 when there is none)."""
        async with self._tx(tenant) as conn:
            result = await conn.execute(
                text(f"DELETE FROM {table} WHERE tenant_id = :t AND user_id = :u AND id = :id"),
                {"t": tenant, "u": user, "id": record_id},
            )
        if not result.rowcount:
            raise MemoryNotFound(f"{what} {record_id!r} not found")

    async def semantic_get(self, tenant: str, user: str, record_id: str) -> SemanticMemoryRecord:
        row = await self._get_visible(
            "memory_semantic", SEMANTIC_COLUMNS, tenant, user, record_id, "semantic memory"
        )
        return semantic_record(row)

    async def semantic_list(
        self,
        tenant: str,
        user: str,
        *,
        external_id: str | None,
        parent_external_id: str | None,
        tag: str | None,
        source: str | None,
        limit: int,
        offset: int,
    ) -> list[SemanticMemoryRecord]:
        params: dict[str, Any] = {"t": tenant, "u": user, "limit": limit, "offset": offset}
        where = ["tenant_id = :t", "(user_id = :u OR is_public)"]
        if external_id is not None:
            where.append("external_id = :e")
            params["e"] = external_id
        if parent_external_id is not None:
            where.append("parent_external_id = :p")
            params["p"] = parent_external_id
        if tag is not None:
            where.append(self.d.tags_all([tag], params))
        if source is not None:
            where.append("source = :source")
            params["source"] = source
        async with self._tx(tenant) as conn:
            result = await conn.execute(
                text(
                    f"SELECT {SEMANTIC_COLUMNS} FROM memory_semantic WHERE "
                    f"{' AND '.join(where)} ORDER BY created_at, chunk_index, id "
                    "LIMIT :limit OFFSET :offset"
                ),
                params,
            )
            return [semantic_record(row) for row in result]

    async def semantic_delete(self, tenant: str, user: str, record_id: str) -> None:
        await self._delete_own("memory_semantic", tenant, user, record_id, "semantic memory")

    async def semantic_delete_external(self, tenant: str, user: str, external_id: str) -> int:
        async with self._tx(tenant) as conn:
            result = await conn.execute(
                text(
                    "DELETE FROM memory_semantic WHERE tenant_id = :t AND user_id = :u AND "
                    "(external_id = :e OR parent_external_id = :e)"
                ),
                {"t": tenant, "u": user, "e": external_id},
            )
        if not result.rowcount:
            raise MemoryNotFound(f"semantic memory with external_id {external_id!r} not found")
        return int(result.rowcount)

    def _semantic_scope(
        self,
        tenant: str,
        user: str,
        params: dict[str, Any],
        *,
        include_public: bool,
        tags: list[str],
        source: str | None,
        metadata: dict[str, Any],
    ) -> str:
        params.update(t=tenant, u=user)
        where = [
            "s.tenant_id = :t",
            "(s.user_id = :u OR s.is_public)" if include_public else "s.user_id = :u",
        ]
        if tags:
            where.append(self.d.tags_all(tags, params, "s."))
        if source is not None:
            where.append("s.source = :source")
            params["source"] = source
        if metadata:
            where.append(self.d.metadata_equals(metadata, params, "s."))
        return " AND ".join(where)

    async def semantic_candidates(
        self,
        tenant: str,
        user: str,
        query_vector: Sequence[float] | None,
        query: str,
        model: ActiveModel,
        *,
        k: int,
        keyword: bool,
        pick: Callable[[list[Ranked], list[Ranked]], list[str]],
        include_public: bool,
        tags: list[str],
        source: str | None,
        metadata: dict[str, Any],
    ) -> tuple[list[Ranked], list[Ranked], dict[str, SemanticMemoryRecord]]:
        """Top ``k`` by vector (active model only) and, with ``keyword``, top ``k`` by
        keyword relevance; the records of the ids ``pick`` chooses from the two lists
        (the final hits: candidates' text is not read), all in one transaction."""
        vector_hits: list[Ranked] = []
        keyword_hits: list[Ranked] = []
        records: dict[str, SemanticMemoryRecord] = {}
        if self.vector_rows_direct and query_vector is not None and not keyword:
            rows = await self.semantic_vector_rows(
                tenant,
                user,
                query_vector,
                model,
                k=k,
                include_public=include_public,
                tags=tags,
                source=source,
                metadata=metadata,
            )
            hits = [Ranked(r["id"], 1.0 - r["distance"]) for r in rows]
            return hits, [], {r["id"]: semantic_record_from_pg(r) for r in rows}
        async with self._read(tenant, search_k=k) as conn:
            if query_vector is not None:
                params: dict[str, Any] = {}
                scope = self._semantic_scope(
                    tenant,
                    user,
                    params,
                    include_public=include_public,
                    tags=tags,
                    source=source,
                    metadata=metadata,
                )
                distance = self.d.distance(model.dims)
                params.update(q=self.d.vector_param(query_vector), k=k)
                # Pure vector ranking returns its candidates: they are read in the same
                # statement (one round trip less per search).
                columns = (
                    "s.id" if keyword else ", ".join(f"s.{c}" for c in SEMANTIC_COLUMNS.split(", "))
                )
                if self.segments is not None:
                    raw = (await conn.get_raw_connection()).driver_connection
                    cover = await self.segments.cover(model.name, model.dims, raw)
                    sql = ranking_sql(
                        cover,
                        columns=columns,
                        distance=distance,
                        where=f"{scope} AND {_on_model(model, 's.')}",
                    )
                else:
                    sql = (
                        f"SELECT {columns}, {distance} AS distance FROM memory_semantic s "
                        f"WHERE {scope} AND {_on_model(model, 's.')} "
                        f"ORDER BY {self._by_distance(distance)} LIMIT :k"
                    )
                rows = await self._ranked(conn, sql, params)
                vector_hits = [Ranked(r.id, 1.0 - float(r.distance)) for r in rows]
                if not keyword:
                    records = {r.id: semantic_record(r) for r in rows}
            terms = keyword_terms(query) if keyword else []
            if terms:
                params = {}
                scope = self._semantic_scope(
                    tenant,
                    user,
                    params,
                    include_public=include_public,
                    tags=tags,
                    source=source,
                    metadata=metadata,
                )
                keyword_hits = [
                    Ranked(record_id, relevance)
                    for record_id, relevance in await keyword_ranking(
                        conn,
                        self.d,
                        terms,
                        scope,
                        params,
                        k=k,
                        cap=self.KEYWORD_CANDIDATES,
                        include_public=include_public,
                        filtered=bool(tags or source or metadata),
                        sample=self.KEYWORD_SAMPLE,
                        share=self.COMMON_TERM_SHARE,
                    )
                ]
            ids = [i for i in pick(vector_hits, keyword_hits) if i not in records]
            records.update(await self._semantic_by_ids(conn, tenant, ids))
        return vector_hits, keyword_hits, records

    @property
    def vector_rows_direct(self) -> bool:
        """Pure vector rankings come as the search function's rows
        (:meth:`semantic_vector_rows`): PostgreSQL with its segment indexes."""
        return self.segments is not None

    async def semantic_vector_rows(
        self,
        tenant: str,
        user: str,
        query_vector: Sequence[float],
        model: ActiveModel,
        *,
        k: int,
        include_public: bool,
        tags: list[str],
        source: str | None,
        metadata: dict[str, Any],
    ) -> list[asyncpg.Record]:
        """Pure vector ranking on PostgreSQL in one round trip, best first: the search
        function sets the tenant, RLS role and HNSW settings and runs the segments'
        ranking in the statement's own transaction; the rows (SEMANTIC_COLUMNS and
        ``distance``) come straight from asyncpg."""
        assert self.segments is not None
        self.require_available()
        params: dict[str, Any] = {}
        scope = self._semantic_scope(
            tenant,
            user,
            params,
            include_public=include_public,
            tags=tags,
            source=source,
            metadata=metadata,
        )
        where = f"{scope} AND {_on_model(model, 's.')}"
        vector = self.d.vector_param(query_vector)
        pool = await self._search_pool()
        for attempt in (1, 2):
            raw = await pool.acquire()
            try:
                cover = await self.segments.cover(model.name, model.dims, raw)
                ef = max(40, min(k, 1000))
                rows = await self._search_rows(
                    raw,
                    self._search_statement(cover, where, model, k),
                    params,
                    # No role: the pool's connections are in the RLS role already.
                    (tenant, None, ef, vector),
                )
                break
            except Exception:
                # Not BaseException: a cancelled search must end, not be read again.
                if not raw.is_closed() or attempt == 2:
                    raise
                # The server dropped it (a restart): open fresh connections, read again
                # (a read is safe to repeat).
                pool.expire_connections()
            finally:
                await pool.release(raw)
        return rows

    def _search_statement(
        self, cover: Cover, where: str, model: ActiveModel, k: int
    ) -> _SearchStatement:
        """The ranking of ``cover`` for this query shape (``where``: scope and model,
        with ``:name`` parameters), built on first use: building it (two statements,
        their parameters renumbered, the function's name hashed) cost more CPU per
        search than the rest of the service's Python work on the statement."""
        key = (cover.segments, where, model, k)
        statement = self._search_statements.get(key)
        if statement is not None:
            return statement
        columns = ", ".join(f"s.{c}" for c in SEMANTIC_COLUMNS.split(", "))
        ranking, static = (
            ranking_sql(cover, columns=columns, distance=d, where=where, limit=str(int(k)))
            for d in (
                self.d.distance(model.dims),
                # The generated function's query vector (schema.static_search_function).
                f"(embedding::vector({int(model.dims)}) <=> p_v)",
            )
        )
        dynamic, names = _positional(ranking, "q", ("$1", "$2"))
        body, static_names = _positional(static, "q", ("p_v", "p_args"))
        assert names == static_names
        # The signature is part of the name: an older function of the same ranking but
        # another parameter type would make the call ambiguous.
        name = static_name(model_tag(model.name, model.dims), cover, f"p_q text\n{static}")
        statement = _SearchStatement(name, static_search_function(name, body), dynamic, names)
        if len(self._search_statements) >= _SEARCH_STATEMENTS:
            self._search_statements.clear()  # covers change; old shapes go
        self._search_statements[key] = statement
        return statement

    async def _search_rows(
        self,
        raw: Any,
        statement: _SearchStatement,
        params: dict[str, Any],
        head: tuple[Any, ...],
    ) -> list[Any]:
        """Rows of a ranking through its generated function (static SQL: its plan is
        made once per session), created on first use; through SEARCH_FUNCTION (planned
        per call) when it cannot be created or was dropped since (a cover replaced).
        ``head``: tenant, RLS role, HNSW ef_search, query vector."""
        name = statement.name
        if name not in self._static_searches and self._static_allowed:
            if statement.create is not None:
                await self._create_search_function(name, statement.create)
        args = _args(params, statement.names)
        tenant, role, ef, vector = head
        if name in self._static_searches:
            try:
                return list(
                    await raw.fetch(
                        f"SELECT * FROM {name}($1, $2, $3, $4, $5) AS h({_SEARCH_ROW})",
                        tenant,
                        role,
                        ef,
                        orjson.dumps(vector, option=orjson.OPT_SERIALIZE_NUMPY).decode(),
                        args,
                    )
                )
            except asyncpg.UndefinedFunctionError:
                self._static_searches.discard(name)
        return list(
            await raw.fetch(_SEARCH_CALL, tenant, role, ef, statement.dynamic, vector, args)
        )

    async def _create_search_function(self, name: str, create: str) -> None:
        """Create a generated search function, on an engine connection (the search
        pool's are in the RLS role); a failure leaves searches on the per-call plan."""
        async with self.engine.connect() as sa:
            owner = (await sa.get_raw_connection()).driver_connection
            assert owner is not None
            try:
                await owner.execute(create)
                self._static_searches.add(name)
            except asyncpg.InsufficientPrivilegeError:
                # A database user without CREATE on the schema: never try again.
                self._static_allowed = False
                log.warning("cannot create search functions; searches plan per call")
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
                # Usually another process creating the same function at the same
                # moment, or a connection the server dropped (a restart: it leaves the
                # pool); the next search tries again.
                if owner.is_closed():
                    await sa.invalidate()
                log.info("search function %s not created: %s", name, exc)

    # --- episodic -------------------------------------------------------------------------

    async def episode_add(
        self,
        tenant: str,
        user: str,
        body: EpisodeCreate,
        vector: Sequence[float],
        model: ActiveModel,
    ) -> EpisodeRecord:
        d = self.d
        params = {
            "id": self.new_id(),
            "t": tenant,
            "u": user,
            "agent": body.agent_id,
            "role": body.role,
            "content": body.content,
            "metadata": d.json_param(body.metadata),
            "session": body.session_id,
            "plan": body.plan_id,
            "emb": d.vector_param(vector),
            "model": model.name,
            "dims": model.dims,
            "now": d.ts(self._clock.now()),
        }
        async with self._tx(tenant) as conn:
            await conn.execute(
                text(
                    "INSERT INTO memory_episodes (id, tenant_id, user_id, agent_id, role, "
                    "content, metadata, session_id, plan_id, embedding, embedding_model, "
                    "embedding_dims, created_at) VALUES (:id, :t, :u, :agent, :role, :content, "
                    f"{d.json_value('metadata')}, :session, :plan, {d.vector_value('emb')}, "
                    ":model, :dims, :now)"
                ),
                params,
            )
            row = (
                await conn.execute(
                    text(
                        f"SELECT {EPISODE_COLUMNS} FROM memory_episodes "
                        "WHERE tenant_id = :t AND id = :id"
                    ),
                    {"t": tenant, "id": params["id"]},
                )
            ).first()
        assert row is not None
        return episode_record(row)

    async def episodes_recent(
        self, tenant: str, user: str, agent_id: str, *, limit: int, session_id: str | None
    ) -> list[EpisodeRecord]:
        params: dict[str, Any] = {"t": tenant, "u": user, "a": agent_id, "limit": limit}
        where = "tenant_id = :t AND user_id = :u AND agent_id = :a"
        if session_id is not None:
            where += " AND session_id = :s"
            params["s"] = session_id
        async with self._tx(tenant) as conn:
            result = await conn.execute(
                text(
                    f"SELECT {EPISODE_COLUMNS} FROM memory_episodes WHERE {where} "
                    "ORDER BY created_at DESC, id DESC LIMIT :limit"
                ),
                params,
            )
            rows = [episode_record(row) for row in result]
        rows.reverse()
        return rows

    async def episode_search(
        self,
        tenant: str,
        user: str,
        agent_id: str,
        query_vector: Sequence[float],
        model: ActiveModel,
        *,
        limit: int,
        since: datetime | None,
        until: datetime | None,
        session_id: str | None,
    ) -> list[tuple[EpisodeRecord, float]]:
        d = self.d
        distance = d.distance(model.dims)
        params: dict[str, Any] = {
            "t": tenant,
            "u": user,
            "a": agent_id,
            "limit": limit,
            "q": d.vector_param(query_vector),
            "m": model.name,
            "dims": model.dims,
        }
        where = (
            "tenant_id = :t AND user_id = :u AND agent_id = :a AND embedding_model = :m "
            "AND embedding_dims = :dims"
        )
        if since is not None:
            where += " AND created_at >= :since"
            params["since"] = d.ts(_dt(since))
        if until is not None:
            where += " AND created_at < :until"
            params["until"] = d.ts(_dt(until))
        if session_id is not None:
            where += " AND session_id = :s"
            params["s"] = session_id
        async with self._read(tenant) as conn:
            rows = await self._ranked(
                conn,
                f"SELECT {EPISODE_COLUMNS}, {distance} AS distance FROM memory_episodes "
                f"WHERE {where} ORDER BY {self._by_distance(distance)} LIMIT :limit",
                params,
            )
            return [(episode_record(r), 1.0 - float(r.distance)) for r in rows]

    async def episode_delete(self, tenant: str, user: str, record_id: str) -> None:
        await self._delete_own("memory_episodes", tenant, user, record_id, "episode")

    # --- procedural -----------------------------------------------------------------------

    async def procedure_add(
        self,
        tenant: str,
        user: str,
        body: ProcedureCreate,
        vector: Sequence[float],
        model: ActiveModel,
    ) -> ProcedureRecord:
        d = self.d
        params = {
            "id": self.new_id(),
            "t": tenant,
            "u": user,
            "agent": body.agent_id,
            "kind": body.kind,
            "content": body.content,
            "situation": body.situation,
            "metadata": d.json_param(body.metadata),
            "tags": d.json_param(body.tags),
            "public": body.public,
            "emb": d.vector_param(vector),
            "model": model.name,
            "dims": model.dims,
            "now": d.ts(self._clock.now()),
        }
        async with self._tx(tenant) as conn:
            await conn.execute(
                text(
                    "INSERT INTO memory_procedures (id, tenant_id, user_id, agent_id, kind, "
                    "content, situation, metadata, tags, is_public, embedding, embedding_model, "
                    "embedding_dims, created_at, updated_at) VALUES (:id, :t, :u, :agent, :kind, "
                    f":content, :situation, {d.json_value('metadata')}, {d.json_value('tags')}, "
                    f":public, {d.vector_value('emb')}, :model, :dims, :now, :now)"
                ),
                params,
            )
        return await self.procedure_get(tenant, user, params["id"])

    async def procedure_get(self, tenant: str, user: str, record_id: str) -> ProcedureRecord:
        row = await self._get_visible(
            "memory_procedures", PROCEDURE_COLUMNS, tenant, user, record_id, "procedure"
        )
        return procedure_record(row)

    async def procedure_list(
        self, tenant: str, user: str, *, agent_id: str | None, kind: str | None, limit: int
    ) -> list[ProcedureRecord]:
        params: dict[str, Any] = {"t": tenant, "u": user, "limit": limit}
        where = "tenant_id = :t AND (user_id = :u OR is_public)"
        if agent_id is not None:
            where += " AND (agent_id = :a OR agent_id IS NULL)"
            params["a"] = agent_id
        if kind is not None:
            where += " AND kind = :k"
            params["k"] = kind
        async with self._tx(tenant) as conn:
            result = await conn.execute(
                text(
                    f"SELECT {PROCEDURE_COLUMNS} FROM memory_procedures WHERE {where} "
                    "ORDER BY created_at, id LIMIT :limit"
                ),
                params,
            )
            return [procedure_record(r) for r in result]

    async def procedure_delete(self, tenant: str, user: str, record_id: str) -> None:
        await self._delete_own("memory_procedures", tenant, user, record_id, "procedure")

    async def procedure_relevant(
        self,
        tenant: str,
        user: str,
        query_vector: Sequence[float],
        model: ActiveModel,
        *,
        agent_id: str | None,
        kinds: list[str] | None,
        limit: int,
    ) -> list[tuple[ProcedureRecord, float]]:
        d = self.d
        distance = d.distance(model.dims)
        params: dict[str, Any] = {
            "t": tenant,
            "u": user,
            "limit": limit,
            "q": d.vector_param(query_vector),
        }
        where = f"tenant_id = :t AND (user_id = :u OR is_public) AND {_on_model(model)}"
        if agent_id is not None:
            where += " AND (agent_id = :a OR agent_id IS NULL)"
            params["a"] = agent_id
        if kinds:
            marks = ", ".join(f":kind{i}" for i in range(len(kinds)))
            where += f" AND kind IN ({marks})"
            params.update({f"kind{i}": k for i, k in enumerate(kinds)})
        async with self._read(tenant, search_k=limit) as conn:
            rows = await self._ranked(
                conn,
                f"SELECT {PROCEDURE_COLUMNS}, {distance} AS distance FROM memory_procedures "
                f"WHERE {where} ORDER BY {self._by_distance(distance)} LIMIT :limit",
                params,
            )
            return [(procedure_record(r), 1.0 - float(r.distance)) for r in rows]

    # --- administration -------------------------------------------------------------------

    async def forget_user(self, tenant: str, user: str) -> tuple[int, int, int]:
        """Delete every long-term record of ``user`` in ``tenant`` (one transaction)."""
        counts = []
        async with self._tx(tenant) as conn:
            for table in ("memory_semantic", "memory_episodes", "memory_procedures"):
                result = await conn.execute(
                    text(f"DELETE FROM {table} WHERE tenant_id = :t AND user_id = :u"),
                    {"t": tenant, "u": user},
                )
                counts.append(int(result.rowcount or 0))
        return counts[0], counts[1], counts[2]

    async def count_other_models(self, tenant: str | None, model: ActiveModel) -> int:
        """Records (of ``tenant``, or of every tenant) whose vectors are on another model."""
        total = 0
        scope = tenant if tenant is not None else ALL_TENANTS
        where = "NOT (embedding_model = :m AND embedding_dims = :dims)"
        params: dict[str, Any] = {"m": model.name, "dims": model.dims}
        if tenant is not None:
            where += " AND tenant_id = :t"
            params["t"] = tenant
        async with self._tx(scope) as conn:
            for table in EMBEDDED_TEXT:
                result = await conn.execute(
                    text(f"SELECT COUNT(*) FROM {table} WHERE {where}"), params
                )
                total += int(result.scalar() or 0)
        return total

    async def stale_batch(
        self, table: str, model: ActiveModel, limit: int
    ) -> list[tuple[str, str]]:
        """Up to ``limit`` (id, embedded text) of ``table`` not on ``model`` (all tenants)."""
        async with self._tx(ALL_TENANTS) as conn:
            result = await conn.execute(
                text(
                    f"SELECT id, {EMBEDDED_TEXT[table]} AS body FROM {table} WHERE NOT "
                    "(embedding_model = :m AND embedding_dims = :dims) ORDER BY id LIMIT :n"
                ),
                {"m": model.name, "dims": model.dims, "n": limit},
            )
            return [(r.id, r.body) for r in result]

    async def set_vectors(
        self,
        table: str,
        rows: Sequence[tuple[str, str, Sequence[float]]],
        model: ActiveModel,
    ) -> int:
        """Store re-embedded vectors; a row rewritten meanwhile (new text) is left alone."""
        if not rows:
            return 0
        column = EMBEDDED_TEXT[table]
        params = [
            {
                "id": record_id,
                "body": body,
                "emb": self.d.vector_param(vector),
                "m": model.name,
                "dims": model.dims,
            }
            for record_id, body, vector in rows
        ]
        async with self._tx(ALL_TENANTS) as conn:
            await conn.execute(
                text(
                    f"UPDATE {table} SET embedding = {self.d.vector_value('emb')}, "
                    "embedding_model = :m, embedding_dims = :dims WHERE id = :id AND "
                    f"{column} = :body AND NOT (embedding_model = :m AND embedding_dims = :dims)"
                ),
                params,
            )
        return len(rows)

    async def prune(self, table: str, *, older_than: datetime) -> int:
        """Delete ``table``'s records (every tenant) not updated since ``older_than``."""
        async with self._tx(ALL_TENANTS) as conn:
            result = await conn.execute(
                text(f"DELETE FROM {table} WHERE {AGE_COLUMN[table]} < :cutoff"),
                {"cutoff": self.d.ts(older_than)},
            )
        return int(result.rowcount or 0)
