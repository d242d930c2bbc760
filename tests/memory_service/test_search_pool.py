"""PostgreSQL vector searches run on the store's own asyncpg pool, whose connections stay
in the RLS role for their whole session (no role switch per search, no reset round trip).

The wall must hold on reuse: a search sees only its tenant's rows, and a pooled
connection after a search is still in the RLS role, outside any transaction, with no
tenant set, so a statement forgetting the tenant there sees nothing at all.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from memory_service import create_app
from memory_service.longterm.schema import RLS_ROLE
from testsupport.services import memory_settings

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}
B = {"X-Tenant-ID": "tenant-b", "X-User-ID": "bob"}
DIMS = 16


def _vector(i: int) -> list[float]:
    return [1.0 if j == i % DIMS else 0.1 for j in range(DIMS)]


async def _search(client: httpx.AsyncClient, headers: dict[str, str]) -> set[str]:
    r = await client.post(
        "/v1/memory/semantic/search",
        json={"query": "x", "embedding": _vector(0), "limit": 10, "mode": "vector"},
        headers=headers,
    )
    assert r.status_code == 200, r.text
    return {hit["record"]["content"].split()[0] for hit in r.json()["hits"]}


async def test_search_pool_connections_stay_walled_between_searches(
    pgvector_url: str, tmp_path: Any
) -> None:
    settings = memory_settings(pgvector_url, tmp_path, embedding_model=f"deterministic/{DIMS}")
    app = create_app(settings)
    async with (
        LifespanManager(app) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(manager.app), base_url="http://memory"
        ) as client,
    ):
        for headers in (A, B):
            for i in range(5):
                r = await client.post(
                    "/v1/memory/semantic",
                    json={"content": f"{headers['X-Tenant-ID']} {i}", "embedding": _vector(i)},
                    headers=headers,
                )
                assert r.status_code == 201, r.text
        assert await _search(client, A) == {"tenant-a"}
        store = manager._state["longterm"].store
        pool = store._searches
        assert pool is not None, "the vector search did not run on the search pool"
        # Take every idle connection (the one the search used among them).
        held = [await pool.acquire() for _ in range(pool.get_size())]
        try:
            for conn in held:
                row = await conn.fetchrow(
                    "SELECT current_user, current_setting('soorma.tenant_id', true), "
                    "(SELECT count(*) FROM memory_semantic)"
                )
                assert (row[0], row[1] or "", row[2]) == (RLS_ROLE, "", 0)
                assert not conn.is_in_transaction()
        finally:
            for conn in held:
                await pool.release(conn)
        assert await _search(client, B) == {"tenant-b"}
        assert await _search(client, A) == {"tenant-a"}
