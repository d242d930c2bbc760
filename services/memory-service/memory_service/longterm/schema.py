"""Tables of long-term memory (semantic, episodic, procedural) for SQLite and PostgreSQL.

Run by migration ``0006_long_term_memory`` and, on PostgreSQL, again at start-up when
the tables are missing but pgvector has become available since (the migration creates
them only where the ``vector`` extension exists, so the other stores keep working on a
PostgreSQL without it; the long-term routes then answer 503).

PostgreSQL: ``embedding vector`` (any dimension: the active model's dimension is chosen
per query and an HNSW index per model is built at start-up, see ``pgvector_indexes``),
a generated ``tsvector`` with the ``simple`` configuration (codes like ``402`` stay
searchable) and row-level security: every row is visible only when
``soorma.tenant_id`` (set per transaction by the service) names its tenant. The table
owner is usually a superuser, which bypasses RLS, so the service switches to the
non-login role ``soorma_memory_rls`` in each transaction (``SET LOCAL ROLE``).

SQLite: ``embedding`` is a float32 blob compared with ``vec_distance_cosine`` (sqlite-vec,
or the same function registered in Python where extensions cannot be loaded), and an
FTS5 table kept in step by triggers.
"""

from __future__ import annotations

from typing import Any

TABLES = ("memory_semantic", "memory_episodes", "memory_procedures")
RLS_ROLE = "soorma_memory_rls"
TENANT_SETTING = "soorma.tenant_id"
# Maintenance (retention, re-embedding) works across tenants under this setting; tenant
# ids never start with '*' (servicekit.auth.ID_PATTERN).
ALL_TENANTS = "*"

_COMMON = """
    tenant_id VARCHAR(128) NOT NULL,
    user_id VARCHAR(128) NOT NULL,
    embedding_model VARCHAR(256) NOT NULL,
    embedding_dims INTEGER NOT NULL,
"""


def _tables(*, pg: bool) -> list[str]:
    key = (
        "id VARCHAR(36) PRIMARY KEY"
        if pg
        else "seq INTEGER PRIMARY KEY, id VARCHAR(36) NOT NULL UNIQUE"
    )
    json = "JSONB" if pg else "TEXT"
    ts = "TIMESTAMPTZ" if pg else "TEXT"
    vec = "vector" if pg else "BLOB"
    false = "false" if pg else "0"
    tsv = (
        ",\n    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED"
        if pg
        else ""
    )
    return [
        f"""CREATE TABLE memory_semantic (
    {key},{_COMMON}
    external_id VARCHAR(512),
    parent_external_id VARCHAR(512),
    chunk_index INTEGER,
    content TEXT NOT NULL,
    content_hash CHAR(64) NOT NULL,
    metadata {json} NOT NULL DEFAULT '{{}}',
    tags {json} NOT NULL DEFAULT '[]',
    source VARCHAR(1024),
    is_public BOOLEAN NOT NULL DEFAULT {false},
    embedding {vec} NOT NULL,
    created_at {ts} NOT NULL,
    updated_at {ts} NOT NULL{tsv}
)""",
        "CREATE UNIQUE INDEX ux_memory_semantic_external ON memory_semantic "
        "(tenant_id, user_id, external_id) WHERE external_id IS NOT NULL",
        "CREATE UNIQUE INDEX ux_memory_semantic_hash ON memory_semantic "
        "(tenant_id, user_id, content_hash) WHERE external_id IS NULL",
        # De-duplication looks up a content hash among all of a user's records.
        "CREATE INDEX ix_memory_semantic_user_hash ON memory_semantic "
        "(tenant_id, user_id, content_hash)",
        "CREATE INDEX ix_memory_semantic_parent ON memory_semantic "
        "(tenant_id, user_id, parent_external_id)",
        "CREATE INDEX ix_memory_semantic_public ON memory_semantic (tenant_id, is_public)",
        "CREATE INDEX ix_memory_semantic_model ON memory_semantic "
        "(embedding_model, embedding_dims)",
        "CREATE INDEX ix_memory_semantic_updated ON memory_semantic (updated_at)",
        f"""CREATE TABLE memory_episodes (
    {key},{_COMMON}
    agent_id VARCHAR(256) NOT NULL,
    role VARCHAR(16) NOT NULL,
    content TEXT NOT NULL,
    metadata {json} NOT NULL DEFAULT '{{}}',
    session_id VARCHAR(256),
    plan_id VARCHAR(256),
    embedding {vec} NOT NULL,
    created_at {ts} NOT NULL
)""",
        "CREATE INDEX ix_memory_episodes_scope ON memory_episodes "
        "(tenant_id, user_id, agent_id, created_at)",
        "CREATE INDEX ix_memory_episodes_model ON memory_episodes "
        "(embedding_model, embedding_dims)",
        "CREATE INDEX ix_memory_episodes_created ON memory_episodes (created_at)",
        f"""CREATE TABLE memory_procedures (
    {key},{_COMMON}
    agent_id VARCHAR(256),
    kind VARCHAR(16) NOT NULL,
    content TEXT NOT NULL,
    situation TEXT NOT NULL,
    metadata {json} NOT NULL DEFAULT '{{}}',
    tags {json} NOT NULL DEFAULT '[]',
    is_public BOOLEAN NOT NULL DEFAULT {false},
    embedding {vec} NOT NULL,
    created_at {ts} NOT NULL,
    updated_at {ts} NOT NULL
)""",
        "CREATE INDEX ix_memory_procedures_scope ON memory_procedures "
        "(tenant_id, user_id, agent_id)",
        "CREATE INDEX ix_memory_procedures_public ON memory_procedures (tenant_id, is_public)",
        "CREATE INDEX ix_memory_procedures_model ON memory_procedures "
        "(embedding_model, embedding_dims)",
        "CREATE INDEX ix_memory_procedures_updated ON memory_procedures (updated_at)",
    ]


_SQLITE_FTS = [
    "CREATE VIRTUAL TABLE memory_semantic_fts USING fts5("
    "content, content='memory_semantic', content_rowid='seq')",
    "CREATE TRIGGER memory_semantic_fts_ai AFTER INSERT ON memory_semantic BEGIN "
    "INSERT INTO memory_semantic_fts(rowid, content) VALUES (new.seq, new.content); END",
    "CREATE TRIGGER memory_semantic_fts_ad AFTER DELETE ON memory_semantic BEGIN "
    "INSERT INTO memory_semantic_fts(memory_semantic_fts, rowid, content) "
    "VALUES ('delete', old.seq, old.content); END",
    "CREATE TRIGGER memory_semantic_fts_au AFTER UPDATE OF content ON memory_semantic BEGIN "
    "INSERT INTO memory_semantic_fts(memory_semantic_fts, rowid, content) "
    "VALUES ('delete', old.seq, old.content); "
    "INSERT INTO memory_semantic_fts(rowid, content) VALUES (new.seq, new.content); END",
]


def _pg_security() -> list[str]:
    wall = (
        f"tenant_id = current_setting('{TENANT_SETTING}', true) "
        f"OR current_setting('{TENANT_SETTING}', true) = '{ALL_TENANTS}'"
    )
    out = [
        "CREATE INDEX ix_memory_semantic_tsv ON memory_semantic USING gin (tsv)",
        # Roles are cluster-wide: another database may have created it already.
        f"""DO $$ BEGIN
    CREATE ROLE {RLS_ROLE} NOLOGIN NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$""",
        f"""DO $$ BEGIN
    EXECUTE format('GRANT {RLS_ROLE} TO %I', current_user);
EXCEPTION WHEN OTHERS THEN NULL;
END $$""",
    ]
    for table in TABLES:
        out += [
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY {table}_tenant_wall ON {table} USING ({wall}) WITH CHECK ({wall})",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {RLS_ROLE}",
        ]
    return out


SEARCH_FUNCTION = "soorma_memory_ranked"
# Search functions generated per cover and query shape (static SQL: PL/pgSQL plans it once
# per session and reuses the plan, where SEARCH_FUNCTION's EXECUTE plans on every call).
STATIC_SEARCH_PREFIX = "soorma_msr_"
_STATIC_BODY_QUOTE = "$soorma_ranked$"


def pg_segment_statements() -> list[str]:
    """Semantic vectors indexed in bulk by segments (``memory_service.longterm.segments``)
    and searches in one round trip; idempotent (migration 0007 and fresh schemas)."""
    return [
        # Insert order, never changed by an update: segments are ranges of it.
        "ALTER TABLE memory_semantic ADD COLUMN IF NOT EXISTS seq BIGINT "
        "GENERATED ALWAYS AS IDENTITY",
        "CREATE INDEX IF NOT EXISTS ix_memory_semantic_seq ON memory_semantic (seq)",
        # Which segments hold a tenant's rows (a search skips the others).
        "CREATE INDEX IF NOT EXISTS ix_memory_semantic_tenant_seq ON memory_semantic "
        "(tenant_id, seq)",
        # The per-model index that every insert went through row by row.
        """DO $$ DECLARE ix text; BEGIN
    FOR ix IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'memory_semantic'::regclass
        AND c.relname LIKE 'ix\\_memory\\_semantic\\_hnsw\\_%'
    LOOP EXECUTE format('DROP INDEX %I', ix); END LOOP;
END $$""",
        # A search in one statement: the transaction's tenant, HNSW settings and RLS
        # role, then the ranking the service built ($1: query vector, $2: the other
        # parameters as text). The caller's connection is in autocommit: the settings
        # end with the statement's own transaction, which is read-only.
        f"""CREATE OR REPLACE FUNCTION {SEARCH_FUNCTION}(
    p_tenant text, p_role text, p_ef integer, p_sql text, p_q real[], p_args text[]
) RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM set_config('transaction_read_only', 'on', true);
    PERFORM set_config('{TENANT_SETTING}', p_tenant, true);
    IF p_ef > 0 THEN
        PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);
        PERFORM set_config('hnsw.ef_search', p_ef::text, true);
    END IF;
    IF p_role IS NOT NULL THEN
        PERFORM set_config('role', p_role, true);
    END IF;
    RETURN QUERY EXECUTE p_sql USING p_q, p_args;
END $$""",
    ]


def static_search_function(name: str, sql: str) -> str | None:
    """``CREATE OR REPLACE FUNCTION name(p_tenant, p_role, p_ef, p_q, p_args)`` doing what
    SEARCH_FUNCTION does with ``sql`` as its static ranking (``p_v``: the query vector as
    a ``vector``, converted once: in a generic plan a cast of the parameter is evaluated
    per row, which made the exact tail's scan 7x slower; ``p_q`` is its text form
    ``[x,y,...]``, which the service writes with orjson in a few microseconds where
    asyncpg's ``real[]`` encoder checked every float against abstract classes;
    ``p_args``: the other parameters as text). None when ``sql`` cannot be quoted."""
    if _STATIC_BODY_QUOTE in sql or not name.startswith(STATIC_SEARCH_PREFIX):
        return None
    return f"""CREATE OR REPLACE FUNCTION {name}(
    p_tenant text, p_role text, p_ef integer, p_q text, p_args text[]
) RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS {_STATIC_BODY_QUOTE}
DECLARE
    p_v vector := p_q::vector;
BEGIN
    -- One statement for all settings (each PL/pgSQL statement is an executor run).
    PERFORM set_config('transaction_read_only', 'on', true),
        set_config('{TENANT_SETTING}', p_tenant, true),
        CASE WHEN p_ef > 0 THEN set_config('hnsw.iterative_scan', 'relaxed_order', true) END,
        CASE WHEN p_ef > 0 THEN set_config('hnsw.ef_search', p_ef::text, true) END,
        CASE WHEN p_role IS NOT NULL THEN set_config('role', p_role, true) END;
    RETURN QUERY {sql};
END {_STATIC_BODY_QUOTE}"""


def drop_static_search_functions(keep_prefix: str = "") -> str:
    """One statement dropping the generated search functions (except those whose name
    starts with ``keep_prefix``)."""
    prefix = STATIC_SEARCH_PREFIX.replace("_", "\\_")
    keep = keep_prefix.replace("'", "''")
    spared = f" AND left(p.proname, {len(keep)}) <> '{keep}'" if keep else ""
    return f"""DO $$ DECLARE f regprocedure; BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.proname LIKE '{prefix}%'{spared}
    LOOP EXECUTE format('DROP FUNCTION IF EXISTS %s', f); END LOOP;
END $$"""


def pg_segment_downgrade() -> list[str]:
    return [
        drop_static_search_functions(),
        f"DROP FUNCTION IF EXISTS {SEARCH_FUNCTION}(text, text, integer, text, real[], text[])",
        """DO $$ DECLARE ix text; BEGIN
    FOR ix IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'memory_semantic'::regclass AND c.relname LIKE 'msv\\_%'
    LOOP EXECUTE format('DROP INDEX %I', ix); END LOOP;
END $$""",
        "ALTER TABLE memory_semantic DROP COLUMN IF EXISTS seq",
    ]


KEYWORD_FUNCTION = "soorma_memory_keyword_ids"


def pg_keyword_statements() -> list[str]:
    """The ids of the tenant's records matching a full-text query, through the GIN index
    (migration 0008 and fresh schemas; idempotent).

    Under row-level security PostgreSQL never uses the GIN index for ``tsv @@ query``:
    ``@@`` is not leakproof, so it may not run before the tenant policy, and every
    keyword search read the whole table (200 ms at 100,000 records, B8). This function
    runs with its owner's rights (who owns the table, outside the policy when a
    superuser; inside it, and slower, otherwise) and applies the tenant wall itself:
    only rows of the transaction's ``soorma.tenant_id`` come back, never another
    tenant's (the ``*`` of maintenance included), and only the user's own and (with
    ``p_public``) public ones. Searches join its ids back to the table in the RLS role,
    with their whole scope (filters too)."""
    signature = f"{KEYWORD_FUNCTION}(tsquery, text, boolean, integer)"
    return [
        # The table's schema is fixed in the body (a definer function must not look
        # its table up on the caller's search_path).
        f"""DO $do$ BEGIN EXECUTE format($create$
CREATE OR REPLACE FUNCTION %1$I.{KEYWORD_FUNCTION}(
    p_query tsquery, p_user text, p_public boolean, p_limit integer
)
RETURNS SETOF varchar LANGUAGE sql STABLE SECURITY DEFINER ROWS 20
SET search_path = pg_catalog, pg_temp AS $body$
    SELECT s.id FROM %1$I.memory_semantic s
    WHERE s.tsv @@ p_query AND s.tenant_id = current_setting('{TENANT_SETTING}', true)
    AND (s.user_id = p_user OR (p_public AND s.is_public))
    LIMIT p_limit
$body$$create$, current_schema()); END $do$""",
        f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC",
        f"GRANT EXECUTE ON FUNCTION {signature} TO {RLS_ROLE}",
    ]


def pg_keyword_downgrade() -> list[str]:
    return [f"DROP FUNCTION IF EXISTS {KEYWORD_FUNCTION}(tsquery, text, boolean, integer)"]


def sqlite_statements() -> list[str]:
    return [*_tables(pg=False), *_SQLITE_FTS]


def postgres_statements() -> list[str]:
    return [
        "CREATE EXTENSION IF NOT EXISTS vector",
        *_tables(pg=True),
        *_pg_security(),
        *pg_segment_statements(),
        *pg_keyword_statements(),
    ]


def pgvector_available(conn: Any) -> bool:
    """Whether this PostgreSQL can run ``CREATE EXTENSION vector`` (sync connection)."""
    row = conn.exec_driver_sql(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
    ).first()
    return row is not None


def tables_exist(conn: Any) -> bool:
    row = conn.exec_driver_sql("SELECT to_regclass('memory_semantic') IS NOT NULL").first()
    return bool(row and row[0])


def create_schema(conn: Any) -> bool:
    """Create the long-term tables on a sync connection; False when pgvector is missing."""
    if conn.dialect.name == "postgresql":
        if not pgvector_available(conn):
            return False
        statements = postgres_statements()
    else:
        statements = sqlite_statements()
    for statement in statements:
        conn.exec_driver_sql(statement)
    return True


def drop_schema(conn: Any) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("DROP TABLE IF EXISTS memory_semantic_fts")
    for table in TABLES:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
