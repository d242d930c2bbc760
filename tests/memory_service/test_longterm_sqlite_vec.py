"""SQLite vector ranking through sqlite-vec (APSW) equals the Python fallback.

The memory service ranks SQLite vectors with sqlite-vec's ``vec_distance_cosine`` on APSW
connections when it can load the extension (``SqliteVecReader``), else with the same
function registered from Python on the engine's own connections. Both run here on one
database: same hits, same order, same scores, for semantic, episodic and procedural
memory, with the tenant/user scoping of each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

from memory_service.longterm.store import ActiveModel, LongTermStore, Ranked
from memory_service.sql import SqlMemoryStore, open_sql_store
from soorma_common.knowledge import EpisodeCreate, ProcedureCreate, SemanticMemoryCreate

pytestmark = pytest.mark.asyncio

DIMS = 64
MODEL = ActiveModel("deterministic/64", DIMS)
TENANTS = ("tenant-a", "tenant-b")
USERS = ("alice", "bob")


@pytest_asyncio.fixture
async def sql(sqlite_url: str) -> AsyncIterator[SqlMemoryStore]:
    store = await open_sql_store(sqlite_url)
    yield store
    await store.engine.dispose()


def _vectors(n: int, seed: int) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [[float(x) for x in row] for row in rng.standard_normal((n, DIMS))]


async def _fill(store: LongTermStore) -> None:
    vectors = iter(_vectors(240, seed=1))
    for tenant in TENANTS:
        for user in USERS:
            items = [
                SemanticMemoryCreate(content=f"{tenant} {user} fact {i}", public=i % 5 == 0)
                for i in range(30)
            ]
            await store.semantic_put(tenant, user, items, [next(vectors) for _ in items], MODEL)
            for i in range(15):
                episode = EpisodeCreate(agent_id="agent", role="user", content=f"said {i}")
                await store.episode_add(tenant, user, episode, next(vectors), MODEL)
            for i in range(15):
                rule = ProcedureCreate(
                    kind="rule", content=f"rule {i}", situation=f"when {i}", public=i % 4 == 0
                )
                await store.procedure_add(tenant, user, rule, next(vectors), MODEL)


def _semantic(hits: tuple[list[Ranked], list[Ranked], dict[str, Any]]) -> list[Any]:
    vector_hits, _, records = hits
    return [(h.id, h.value, records[h.id].user_id) for h in vector_hits]


def _same_ranking(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    """Same ids in the same order with the same scores (float32 C vs float64 Python)."""
    return [x[0] for x in a] == [y[0] for y in b] and all(
        x[1] == pytest.approx(y[1], abs=1e-5) and x[2:] == y[2:] for x, y in zip(a, b, strict=True)
    )


async def test_sqlite_vec_ranks_like_the_python_fallback(sql: SqlMemoryStore) -> None:
    with_vec = await LongTermStore.open(sql.engine)
    assert with_vec.vectors is not None, "APSW with sqlite-vec should load here"
    fallback = LongTermStore(sql.engine, available=True, rls_role=False)
    assert fallback.vectors is None
    try:
        await _fill(fallback)
        compared = 0
        for query in _vectors(6, seed=2):
            for tenant in TENANTS:
                for user in USERS:
                    found = []
                    for store in (with_vec, fallback):
                        semantic = await store.semantic_candidates(
                            tenant,
                            user,
                            query,
                            "unused",
                            MODEL,
                            k=12,
                            keyword=False,
                            pick=lambda vector, _keyword: [h.id for h in vector],
                            include_public=True,
                            tags=[],
                            source=None,
                            metadata={},
                        )
                        episodes = await store.episode_search(
                            tenant,
                            user,
                            "agent",
                            query,
                            MODEL,
                            limit=5,
                            since=None,
                            until=None,
                            session_id=None,
                        )
                        rules = await store.procedure_relevant(
                            tenant, user, query, MODEL, agent_id=None, kinds=None, limit=5
                        )
                        found.append(
                            (
                                _semantic(semantic),
                                [(r.id, s) for r, s in episodes],
                                [(r.id, s) for r, s in rules],
                            )
                        )
                    for part in range(3):
                        assert _same_ranking(found[0][part], found[1][part])
                    semantic_hits = found[0][0]
                    assert len(semantic_hits) == 12
                    # Scoped: the user's own records and the tenant's public ones only.
                    assert all(user_id in USERS for _, _, user_id in semantic_hits)
                    compared += 1
        assert compared == 24
    finally:
        with_vec.close()


async def test_sqlite_vec_reads_what_was_just_written(sql: SqlMemoryStore) -> None:
    store = await LongTermStore.open(sql.engine)
    assert store.vectors is not None
    try:
        [vector] = _vectors(1, seed=3)
        [(record, created)] = await store.semantic_put(
            "tenant-a", "alice", [SemanticMemoryCreate(content="fresh")], [vector], MODEL
        )
        assert created
        hits, _, records = await store.semantic_candidates(
            "tenant-a",
            "alice",
            vector,
            "fresh",
            MODEL,
            k=1,
            keyword=False,
            pick=lambda vector_hits, _keyword: [h.id for h in vector_hits],
            include_public=True,
            tags=[],
            source=None,
            metadata={},
        )
        assert [h.id for h in hits] == [record.id]
        assert hits[0].value == pytest.approx(1.0, abs=1e-6)
        assert records[record.id].content == "fresh"
        # Another tenant sees nothing of it.
        hits, _, _ = await store.semantic_candidates(
            "tenant-b",
            "alice",
            vector,
            "fresh",
            MODEL,
            k=1,
            keyword=False,
            pick=lambda vector_hits, _keyword: [h.id for h in vector_hits],
            include_public=True,
            tags=[],
            source=None,
            metadata={},
        )
        assert hits == []
    finally:
        store.close()
