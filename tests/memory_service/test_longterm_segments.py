"""Semantic vectors indexed in bulk by segments on PostgreSQL
(``memory_service.longterm.segments``): the builder's plan, searches across sealed
segments and the unsealed tail, and a build killed half-way (SIGKILL of the PostgreSQL
backend running it) that loses nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import asyncpg
import numpy as np
import pytest

from memory_service import create_app
from memory_service.longterm.segments import (
    Build,
    Cover,
    SegmentIndex,
    choose_cover,
    layout_prefix,
    plan_step,
    ranking_sql,
)
from memory_service.longterm.store import positional
from testsupport.services import in_process, memory_settings

A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}
B = {"X-Tenant-ID": "tenant-b", "X-User-ID": "bob"}
DIMS = 16


# --- the plan (pure) ---------------------------------------------------------------------


def test_the_cover_tiles_from_zero_and_prefers_a_merged_range_over_its_pieces() -> None:
    assert choose_cover([]) == Cover()
    # A merge finished but its pieces were not dropped yet (a crash in between).
    cover = choose_cover([(0, 10), (10, 20), (0, 20), (20, 25), (30, 40)])
    assert cover.segments == ((0, 20), (20, 25))
    assert cover.sealed_hi == 25
    # Nothing starts at 0: every row is in the tail, searched exactly.
    assert choose_cover([(5, 10)]).sealed_hi == 0


def test_the_builder_seals_a_full_tail_and_merges_segments_not_larger_than_it() -> None:
    nothing = Cover()
    assert plan_step(nothing, [], 99, 100, idle=False, seal_rows=100) is None
    assert plan_step(nothing, [], 150, 151, idle=False, seal_rows=100) == Build(0, 151, ())
    one = Cover(((0, 151),))
    # Past the segments a load may leave unmerged: a tail as large as the newest
    # segment merges with it (sizes double), a smaller one stays on its own.
    assert plan_step(
        one, [150], 150, 301, idle=False, seal_rows=100, max_segments_writing=1
    ) == Build(0, 301, ((0, 151),))
    many = Cover(((0, 1000), (1000, 1100)))
    assert plan_step(
        many, [1000, 100], 120, 1300, idle=False, seal_rows=100, max_segments_writing=2
    ) == Build(1000, 1300, ((1000, 1100),))


def test_while_writes_go_on_full_tails_are_sealed_without_merging() -> None:
    # Merges rebuild indexed rows; during a load they took the writers' CPU.
    one = Cover(((0, 151),))
    assert plan_step(one, [150], 150, 301, idle=False, seal_rows=100) == Build(151, 301, ())
    many = Cover(tuple((i * 100, i * 100 + 100) for i in range(10)))
    assert plan_step(many, [100] * 10, 100, 1100, idle=False, seal_rows=100) == Build(
        1000, 1100, ()
    )
    # A small tail waits; writes pausing merge everything into one index.
    assert plan_step(many, [100] * 10, 50, 1050, idle=False, seal_rows=100) is None
    assert plan_step(many, [100] * 10, 50, 1050, idle=True, seal_rows=100) == Build(
        0, 1050, many.segments
    )
    # At the cap, the usual merges resume (sizes doubling from newest to oldest).
    step = plan_step(
        many, [100] * 10, 100, 1100, idle=False, seal_rows=100, max_segments_writing=10
    )
    assert step is not None and step.replaces and step.hi == 1100


def test_an_idle_builder_merges_everything_only_when_worth_a_rebuild() -> None:
    segments = Cover(((0, 1000), (1000, 1500), (1500, 1700)))
    assert plan_step(segments, [1000, 500, 200], 0, 1700, idle=True, seal_rows=100) == Build(
        0, 1700, segments.segments
    )
    # One large segment and a trickle of new rows: no full rebuild per write.
    big = Cover(((0, 100_000),))
    assert plan_step(big, [100_000], 1, 100_002, idle=True, seal_rows=5000) is None
    step = plan_step(big, [100_000], 600, 100_601, idle=True, seal_rows=5000)
    assert step == Build(100_000, 100_601, ())
    assert plan_step(big, [100_000], 0, 100_001, idle=True, seal_rows=5000) is None


def test_the_search_statement_ranks_each_segment_and_the_tail_in_one_statement() -> None:
    cover = Cover(((0, 10), (10, 30)))
    sql = ranking_sql(cover, columns="s.id", distance="d", where="s.tenant_id = :t", limit="10")
    assert sql.count("UNION ALL") == 2
    assert "s.seq >= 0 AND s.seq < 10" in sql and "s.seq >= 30 ORDER BY" in sql
    text, args = positional(sql + " AND x = CAST(:q AS real[])::vector", {"t": "a", "q": [1]})
    assert ":t" not in text and "$2[1]" in text and "CAST($1 AS real[])::vector" in text
    assert args == ["a"]


# --- on PostgreSQL -------------------------------------------------------------------------


def _plain(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def _cover(url: str) -> tuple[Cover, int, list[str]]:
    """(valid cover, last seq, names of INVALID segment indexes)."""
    conn = await asyncpg.connect(_plain(url))
    try:
        rows = await conn.fetch(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c "
            "ON c.oid = i.indexrelid WHERE i.indrelid = 'memory_semantic'::regclass "
            "AND c.relname LIKE 'msv\\_%'"
        )
        last = await conn.fetchval("SELECT coalesce(max(seq), 0) FROM memory_semantic")
    finally:
        await conn.close()
    ranges = [
        (int(lo), int(hi))
        for r in rows
        if r["indisvalid"]
        for lo, hi in [r["relname"].rsplit("_", 2)[1:]]
    ]
    invalid = [r["relname"] for r in rows if not r["indisvalid"]]
    return choose_cover(ranges), int(last), invalid


async def _wait_indexed(url: str, *, limit_s: float = 90.0) -> Cover:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        cover, last, invalid = await _cover(url)
        if cover.sealed_hi > last and not invalid:
            return cover
        await asyncio.sleep(0.2)
    raise AssertionError(f"not indexed: {await _cover(url)}")


def _vectors(n: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((n, DIMS)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


async def _store(client: Any, headers: dict[str, str], matrix: np.ndarray, tag: str) -> list[str]:
    ids: list[str] = []
    for start in range(0, len(matrix), 40):
        items = [
            {"content": f"{tag} chunk {i}", "embedding": matrix[i].tolist()}
            for i in range(start, min(start + 40, len(matrix)))
        ]
        r = await client.post("/v1/memory/semantic/batch", json={"items": items}, headers=headers)
        assert r.status_code in (200, 201), r.text
        ids += [record["id"] for record in r.json()]
    return ids


async def _search(
    client: Any, headers: dict[str, str], vector: np.ndarray, limit: int = 10
) -> list:
    r = await client.post(
        "/v1/memory/semantic/search",
        json={"query": "q", "mode": "vector", "limit": limit, "embedding": vector.tolist()},
        headers=headers,
    )
    assert r.status_code == 200, r.text
    return [(h["record"]["id"], h["score"]) for h in r.json()["hits"]]


@pytest.mark.asyncio
async def test_searches_across_bulk_built_segments_match_exact_ranking(
    pgvector_url: str, tmp_path: Any
) -> None:
    settings = memory_settings(
        pgvector_url,
        tmp_path,
        embedding_model=f"deterministic/{DIMS}",
        memory_vector_seal_rows=40,
        memory_vector_idle_seconds=0.5,
    )
    mine, theirs = _vectors(200, 1), _vectors(80, 2)
    queries = _vectors(12, 3)
    async with in_process(create_app(settings), base_url="http://memory") as client:
        ids = await _store(client, A, mine, "a")
        await _store(client, B, theirs, "b")
        cover = await _wait_indexed(pgvector_url)
        assert cover.segments, "the builder built no segment index"
        found = 0
        for q in queries:
            hits = await _search(client, A, q)
            truth = {ids[i] for i in np.argsort(-(mine @ q))[:10]}
            found += len({h for h, _ in hits} & truth)
            # Only tenant A's records, best first, scores = cosine similarity.
            assert {h for h, _ in hits} <= set(ids)
            scores = [s for _, s in hits]
            assert scores == sorted(scores, reverse=True)
            assert scores[0] == pytest.approx(float(np.max(mine @ q)), abs=1e-4)
        assert found / (10 * len(queries)) >= 0.95
        # Rows written after the last build are in the tail, searched exactly.
        extra = _vectors(3, 4)
        extra_ids = await _store(client, A, extra, "late")
        assert (await _search(client, A, extra[0], 1))[0][0] == extra_ids[0]
        # An upsert of a sealed row moves its vector (its new version enters the
        # segment's index); a deletion takes it out of every search.
        target = mine[0]
        far = -target
        r = await client.post(
            "/v1/memory/semantic",
            json={"content": "moved", "external_id": "doc-1", "embedding": target.tolist()},
            headers=A,
        )
        assert r.status_code in (200, 201), r.text
        await _wait_indexed(pgvector_url)
        r = await client.post(
            "/v1/memory/semantic",
            json={"content": "moved again", "external_id": "doc-1", "embedding": far.tolist()},
            headers=A,
        )
        doc = r.json()["id"]
        top = await _search(client, A, far, 1)
        assert top[0][0] == doc and top[0][1] == pytest.approx(1.0, abs=1e-4)
        assert doc not in {h for h, _ in await _search(client, A, target, 5)}
        r = await client.delete(f"/v1/memory/semantic/{doc}", headers=A)
        assert r.status_code in (200, 204), r.text
        assert doc not in {h for h, _ in await _search(client, A, far, 10)}
        # Tenant B sees only its own records through the same segment indexes.
        b_hits = await _search(client, B, theirs[5], 10)
        assert b_hits and all(h not in set(ids) for h, _ in b_hits)


async def _search_functions(url: str) -> tuple[str, list[str]]:
    """(the active model's tag, names of the generated search functions)."""
    conn = await asyncpg.connect(_plain(url))
    try:
        index = await conn.fetchval(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'memory_semantic'::regclass AND c.relname LIKE 'msv\\_%' "
            "LIMIT 1"
        )
        names = await conn.fetch(
            "SELECT proname FROM pg_proc WHERE proname LIKE 'soorma\\_msr\\_%'"
        )
    finally:
        await conn.close()
    return index.split("_")[1], sorted(r["proname"] for r in names)


async def _until(check: Any, *, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.2)


@pytest.mark.asyncio
async def test_searches_run_a_function_planned_once_per_cover_and_follow_a_new_cover(
    pgvector_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Static SQL generated per cover (its plan cached per session) instead of dynamic
    # SQL planned on every call; a new cover is picked up by the next searches.
    monkeypatch.setattr(SegmentIndex, "SWEEP_SECONDS", 0.5)
    settings = memory_settings(
        pgvector_url,
        tmp_path,
        embedding_model=f"deterministic/{DIMS}",
        memory_vector_seal_rows=40,
        memory_vector_idle_seconds=0.5,
    )
    mine = _vectors(160, 6)
    async with in_process(create_app(settings), base_url="http://memory") as client:
        first_ids = await _store(client, A, mine[:80], "a")
        first = await _wait_indexed(pgvector_url)
        assert (await _search(client, A, mine[3], 1))[0][0] == first_ids[3]
        tag, names = await _search_functions(pgvector_url)
        assert [n for n in names if n.startswith(layout_prefix(tag, first))], names

        more_ids = await _store(client, A, mine[80:], "b")
        assert await _wait_indexed(pgvector_url) != first

        async def on_new_cover() -> bool:
            # Every search is right whichever cover it ran on; the next ones run on
            # the current cover's function, and the old cover's functions are dropped.
            hit = (await _search(client, A, mine[120], 1))[0][0]
            assert hit == more_ids[40]
            current, _, _ = await _cover(pgvector_url)
            _, names = await _search_functions(pgvector_url)
            return any(n.startswith(layout_prefix(tag, current)) for n in names) and not any(
                n.startswith(layout_prefix(tag, first)) for n in names
            )

        await _until(on_new_cover)

        # A generated function dropped under the service (another process's builder
        # swept it): the search still answers, and the function comes back.
        conn = await asyncpg.connect(_plain(pgvector_url))
        try:
            await conn.execute(
                "DO $$ DECLARE f regprocedure; BEGIN FOR f IN SELECT oid::regprocedure "
                "FROM pg_proc WHERE proname LIKE 'soorma\\_msr\\_%' "
                "LOOP EXECUTE format('DROP FUNCTION %s', f); END LOOP; END $$"
            )
        finally:
            await conn.close()

        async def recreated() -> bool:
            assert (await _search(client, A, mine[7], 1))[0][0] == first_ids[7]
            current, _, _ = await _cover(pgvector_url)
            _, names = await _search_functions(pgvector_url)
            return any(n.startswith(layout_prefix(tag, current)) for n in names)

        await _until(recreated)


@pytest.mark.asyncio
async def test_a_build_killed_half_way_loses_nothing_and_is_redone(
    pgvector_url: str, tmp_path: Any
) -> None:
    """SIGKILL of the PostgreSQL backend running ``CREATE INDEX CONCURRENTLY`` (the
    server restarts every connection): the INVALID index it leaves is never used, every
    acknowledged record is still found, and the builder drops it and builds again."""
    settings = memory_settings(
        pgvector_url,
        tmp_path,
        embedding_model=f"deterministic/{DIMS}",
        memory_vector_seal_rows=40,
        memory_vector_idle_seconds=0.5,
    )
    plain = _plain(pgvector_url)
    mine = _vectors(120, 5)
    async with in_process(create_app(settings), base_url="http://memory") as client:
        # A writer whose transaction stays open holds the build in its wait phase, with
        # the new index already in the catalog (INVALID), long enough to kill it.
        blocker = await asyncpg.connect(plain)
        await blocker.execute("BEGIN")
        await blocker.execute(
            "INSERT INTO memory_semantic (id, tenant_id, user_id, embedding_model, "
            "embedding_dims, content, content_hash, embedding, created_at, updated_at) "
            "VALUES ('uncommitted', 'tenant-a', 'alice', $1, $2, 'x', repeat('0', 64), "
            "$3::real[]::vector, now(), now())",
            f"deterministic/{DIMS}",
            DIMS,
            mine[0].tolist(),
        )
        ids = await _store(client, A, mine, "a")
        watcher = await asyncpg.connect(plain)
        pid = None
        for _ in range(300):
            pid = await watcher.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONCURRENTLY%msv%'"
            )
            if pid is not None:
                break
            await asyncio.sleep(0.1)
        assert pid is not None, "the builder never started a build"
        await asyncio.sleep(0.3)
        # Mid-build: the index is in the catalog, not yet valid.
        _, _, invalid = await _cover(pgvector_url)
        assert invalid, "no build in progress to kill"
        await watcher.close()
        os.kill(pid, signal.SIGKILL)
        # The postmaster answers a killed backend by ending every other one and recovering;
        # a connection made before it noticed would see the old server, so wait for the
        # blocker's session to end first. The server is back once a connection succeeds.
        for _ in range(100):
            try:
                await blocker.execute("SELECT 1")
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the server never restarted its sessions after the SIGKILL")
        for _ in range(100):
            try:
                conn = await asyncpg.connect(plain)
                await conn.close()
                break
            except (OSError, asyncpg.PostgresError):
                await asyncio.sleep(0.2)
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
            await blocker.execute("COMMIT")
        # Every acknowledged record is found while the index is missing (exact tail).
        for i in (0, 57, 119):
            hits = await _search(client, A, mine[i], 1)
            assert hits[0][0] == ids[i]
        listed = await client.get("/v1/memory/semantic?limit=1000", headers=A)
        assert sorted(r["id"] for r in listed.json()) == sorted(ids)
        # The builder recovers: the INVALID index is gone, everything is indexed again.
        cover = await _wait_indexed(pgvector_url)
        assert cover.segments
        for i in (0, 57, 119):
            assert (await _search(client, A, mine[i], 1))[0][0] == ids[i]


def _migrate(connection: Any, revision: str, *, down: bool = False) -> None:
    from alembic import command
    from alembic.config import Config

    from memory_service.sql import MIGRATIONS, VERSION_TABLE

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    config.attributes["version_table"] = VERSION_TABLE
    (command.downgrade if down else command.upgrade)(config, revision)


@pytest.mark.asyncio
async def test_migration_0007_numbers_existing_rows_and_drops_the_row_by_row_index(
    pgvector_url: str,
) -> None:
    from sqlalchemy import text

    from servicekit.db import make_engine

    engine = make_engine(pgvector_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_migrate, "0006_long_term_memory")
            await conn.execute(
                text(
                    "INSERT INTO memory_semantic (id, tenant_id, user_id, embedding_model, "
                    "embedding_dims, content, content_hash, embedding, created_at, updated_at) "
                    "SELECT 'r' || i, 't', 'u', 'm', 2, 'c' || i, md5(i::text) || md5(i::text), "
                    "'[1,2]', now(), now() FROM generate_series(1, 3) i"
                )
            )
            # What 0006-era services built at start-up: every insert went through it.
            await conn.execute(
                text(
                    "CREATE INDEX ix_memory_semantic_hnsw_0123456789ab ON memory_semantic "
                    "USING hnsw ((embedding::vector(2)) vector_cosine_ops)"
                )
            )
            await conn.run_sync(_migrate, "head")
            seqs = (await conn.execute(text("SELECT seq FROM memory_semantic"))).scalars().all()
            indexes = (
                (
                    await conn.execute(
                        text("SELECT indexname FROM pg_indexes WHERE tablename = 'memory_semantic'")
                    )
                )
                .scalars()
                .all()
            )
            function = (
                await conn.execute(text("SELECT to_regproc('soorma_memory_ranked')::text"))
            ).scalar()
        assert sorted(seqs) == [1, 2, 3]
        assert "ix_memory_semantic_hnsw_0123456789ab" not in indexes
        assert {"ix_memory_semantic_seq", "ix_memory_semantic_tenant_seq"} <= set(indexes)
        assert function == "soorma_memory_ranked"
        async with engine.begin() as conn:
            await conn.run_sync(_migrate, "0006_long_term_memory", down=True)
            columns = (
                (
                    await conn.execute(
                        text(
                            "SELECT column_name FROM information_schema.columns "
                            "WHERE table_name = 'memory_semantic'"
                        )
                    )
                )
                .scalars()
                .all()
            )
        assert "seq" not in columns
    finally:
        await engine.dispose()


async def _fill(url: str, tenant: str, rows: int) -> None:
    """``rows`` semantic rows of one tenant written straight into the table (the schema
    comes from the service's start-up), then statistics."""
    conn = await asyncpg.connect(_plain(url))
    try:
        await conn.execute(
            "INSERT INTO memory_semantic (id, tenant_id, user_id, content, content_hash, "
            "embedding, embedding_model, embedding_dims, created_at, updated_at) "
            "SELECT 'r' || i, $1, 'alice', 'chunk ' || i, md5(i::text) || md5(i::text), "
            f"array_fill(1, ARRAY[{DIMS}])::vector, 'deterministic', {DIMS}, now(), now() "
            "FROM generate_series(1, $2) i",
            tenant,
            rows,
        )
        await conn.execute("ANALYZE memory_semantic")
    finally:
        await conn.close()


@pytest.mark.asyncio
async def test_a_segment_gate_probes_the_btree_even_where_a_scan_looks_cheap(
    pgvector_url: str, tmp_path: Any
) -> None:
    # One tenant holds every row and random reads are costed high: the gate written as
    # EXISTS was planned as a sequential scan from the table's first page (reading every
    # earlier segment's rows); in index order with LIMIT 1 only a btree answers cheaply.
    settings = memory_settings(pgvector_url, tmp_path, embedding_model=f"deterministic/{DIMS}")
    async with in_process(create_app(settings), base_url="http://memory"):
        pass  # the schema
    await _fill(pgvector_url, "tenant-a", 18_000)
    cover = Cover(((0, 9001), (9001, 16501)))
    sql = ranking_sql(cover, columns="s.id", distance="s.seq", where="s.tenant_id = :t")
    conn = await asyncpg.connect(_plain(pgvector_url))
    try:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute("SET random_page_cost = 40")
        await conn.execute(
            f"PREPARE ranking(text) AS {sql.replace(':t', '$1').replace(':k', '10')}"
        )
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN EXECUTE ranking('tenant-a')"))
    finally:
        await conn.close()
    assert "on memory_semantic e" in plan, plan
    assert "Seq Scan on memory_semantic e" not in plan, plan


@pytest.mark.asyncio
async def test_a_database_user_without_create_searches_through_the_planned_per_call_function(
    pgvector_url: str, tmp_path: Any
) -> None:
    # The generated search functions need CREATE on the schema; a service whose user
    # cannot create them (here: the privilege revoked while it runs) searches through
    # SEARCH_FUNCTION (planned per call), with the same hits.
    settings = memory_settings(
        pgvector_url,
        tmp_path,
        embedding_model=f"deterministic/{DIMS}",
        memory_vector_seal_rows=40,
        memory_vector_idle_seconds=0.5,
    )
    mine = _vectors(120, 8)
    async with in_process(create_app(settings), base_url="http://memory") as client:
        ids = await _store(client, A, mine, "a")
        await _wait_indexed(pgvector_url)
    role = "soorma_limited_" + os.urandom(4).hex()
    conn = await asyncpg.connect(_plain(pgvector_url))
    try:
        # The tables' owner, allowed to create in the schema while it starts (it builds
        # indexes there) and no longer once it runs.
        await conn.execute(f"CREATE ROLE {role} LOGIN")
        await conn.execute(f"GRANT USAGE, CREATE ON SCHEMA public TO {role}")
        await conn.execute(
            "DO $$ DECLARE t text; BEGIN FOR t IN SELECT tablename FROM pg_tables "
            "WHERE schemaname = 'public' LOOP EXECUTE format('ALTER TABLE %I OWNER TO "
            f"{role}', t); END LOOP; END $$"
        )
        limited = settings.model_copy(
            update={"memory_database_url": pgvector_url.replace("://postgres@", f"://{role}@", 1)}
        )
        async with in_process(create_app(limited), base_url="http://memory") as client:
            await conn.execute(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC, {role}")
            await conn.execute(
                "DO $$ DECLARE f regprocedure; BEGIN FOR f IN SELECT oid::regprocedure "
                "FROM pg_proc WHERE proname LIKE 'soorma\\_msr\\_%' "
                "LOOP EXECUTE format('DROP FUNCTION %s', f); END LOOP; END $$"
            )
            for i in (3, 50, 119):
                hits = await _search(client, A, mine[i], 5)
                truth = [ids[j] for j in np.argsort(-(mine @ mine[i]))[:5]]
                assert [h for h, _ in hits] == truth
                assert hits[0][1] == pytest.approx(1.0, abs=1e-4)
            created = await conn.fetchval(
                "SELECT count(*) FROM pg_proc WHERE proname LIKE 'soorma\\_msr\\_%'"
            )
            assert created == 0
    finally:
        await conn.execute(f"DROP OWNED BY {role}")
        await conn.execute(f"DROP ROLE {role}")
        await conn.close()
