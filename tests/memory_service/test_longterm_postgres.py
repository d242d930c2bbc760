"""PostgreSQL specifics of long-term memory: row-level security as a second wall, and a
PostgreSQL without pgvector (long-term routes answer 503, everything else works)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from memory_service import create_app
from memory_service.longterm.schema import RLS_ROLE
from memory_service.longterm.store import LongTermStore
from memory_service.sql import open_sql_store
from testsupport.services import in_process, memory_settings

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}
B = {"X-Tenant-ID": "tenant-b", "X-User-ID": "bob"}


def _plain(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def _seed(url: str, tmp_path: Any) -> None:
    settings = memory_settings(url, tmp_path, embedding_model="deterministic/16")
    async with in_process(create_app(settings), base_url="http://memory") as client:
        for headers in (A, B):
            for path, body in (
                ("/v1/memory/semantic", {"content": f"{headers['X-Tenant-ID']} knowledge"}),
                ("/v1/memory/episodes", {"agent_id": "x", "role": "user", "content": "hi"}),
                ("/v1/memory/procedures", {"kind": "rule", "content": "r", "situation": "s"}),
            ):
                r = await client.post(path, json=body, headers=headers)
                assert r.status_code == 201, r.text


async def test_the_search_transaction_is_walled_read_only_and_leaves_nothing_behind(
    pgvector_url: str, tmp_path: Any
) -> None:
    """Searches begin their transaction and its settings in one message (``_read``):
    the tenant wall holds there too, and the pooled connection comes back clean."""
    await _seed(pgvector_url, tmp_path)
    sql = await open_sql_store(pgvector_url)
    try:
        store = await LongTermStore.open(sql.engine)
        async with store._read("tenant-a") as conn:
            rows = await conn.execute(text("SELECT DISTINCT tenant_id FROM memory_semantic"))
            assert [r[0] for r in rows] == ["tenant-a"]
        with pytest.raises(DBAPIError, match="read-only"):
            async with store._read("tenant-a") as conn:
                await conn.execute(text("UPDATE memory_semantic SET source = 'x'"))
        # Every pooled connection is back to the owner role, outside any transaction and
        # with no tenant set.
        async with sql.engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT current_user, current_setting('soorma.tenant_id', true), "
                        "(SELECT count(DISTINCT tenant_id) FROM memory_semantic)"
                    )
                )
            ).one()
            assert (row[0], row[1] or "", row[2]) == ("postgres", "", 2)
        async with store._read("tenant-b") as conn:
            rows = await conn.execute(text("SELECT DISTINCT tenant_id FROM memory_semantic"))
            assert [r[0] for r in rows] == ["tenant-b"]
    finally:
        await sql.engine.dispose()


async def test_a_query_that_forgets_the_tenant_sees_only_its_own_tenant(
    pgvector_url: str, tmp_path: Any
) -> None:
    await _seed(pgvector_url, tmp_path)
    conn = await asyncpg.connect(_plain(pgvector_url))
    try:
        async with conn.transaction():
            # What the service does at the start of every transaction...
            await conn.execute(
                "SELECT set_config('soorma.tenant_id', 'tenant-a', true), "
                f"set_config('role', '{RLS_ROLE}', true)"
            )
            # ...and then a statement without any tenant condition.
            for table in ("memory_semantic", "memory_episodes", "memory_procedures"):
                tenants = await conn.fetch(f"SELECT DISTINCT tenant_id FROM {table}")
                assert [row[0] for row in tenants] == ["tenant-a"], table
            updated = await conn.execute("UPDATE memory_semantic SET source = 'touched'")
            assert updated == "UPDATE 1"
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with conn.transaction():
                await conn.execute(
                    "SELECT set_config('soorma.tenant_id', 'tenant-a', true), "
                    f"set_config('role', '{RLS_ROLE}', true)"
                )
                # Writing a row of another tenant is refused (the policy's WITH CHECK).
                await conn.execute(
                    "INSERT INTO memory_procedures (id, tenant_id, user_id, kind, content, "
                    "situation, embedding, embedding_model, embedding_dims, created_at, "
                    "updated_at) VALUES ('x', 'tenant-b', 'u', 'rule', 'c', 's', '[1]', 'm', "
                    "1, now(), now())"
                )
        async with conn.transaction():
            # No tenant set: nothing at all.
            await conn.execute(f"SELECT set_config('role', '{RLS_ROLE}', true)")
            assert await conn.fetchval("SELECT count(*) FROM memory_semantic") == 0
        # The superuser (tables' owner) sees both: the role switch is what makes RLS apply.
        assert await conn.fetchval("SELECT count(DISTINCT tenant_id) FROM memory_semantic") == 2
        sources = await conn.fetch("SELECT tenant_id, source FROM memory_semantic ORDER BY 1")
        assert [tuple(r) for r in sources] == [("tenant-a", "touched"), ("tenant-b", None)]
    finally:
        await conn.close()


@pytest.mark.postgres
async def test_postgres_without_pgvector_answers_503_and_keeps_the_rest(
    postgres_url: str, tmp_path: Any
) -> None:
    conn = await asyncpg.connect(_plain(postgres_url))
    try:
        has_vector = await conn.fetchval(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
        )
    finally:
        await conn.close()
    if has_vector:
        pytest.skip("this PostgreSQL has pgvector; the test is about one without it")
    settings = memory_settings(postgres_url, tmp_path, embedding_model="deterministic/16")
    async with in_process(create_app(settings), base_url="http://memory") as client:
        for method, path, body in (
            ("POST", "/v1/memory/semantic", {"content": "x"}),
            ("POST", "/v1/memory/semantic/search", {"query": "x"}),
            ("GET", "/v1/memory/semantic", None),
            ("POST", "/v1/memory/episodes", {"agent_id": "a", "role": "user", "content": "x"}),
            ("GET", "/v1/memory/episodes/recent?agent_id=a", None),
            ("POST", "/v1/memory/procedures/relevant", {"query": "x"}),
            ("DELETE", "/v1/memory/users/alice", None),
        ):
            r = await client.request(method, path, json=body, headers=A)
            assert r.status_code == 503, (path, r.text)
            assert r.json()["error"]["code"] == "vector_search_unavailable"
            assert "pgvector not installed" in r.json()["error"]["message"]
        r = await client.post("/v1/memory/sessions", json={"session_id": "s"}, headers=A)
        assert r.status_code == 201
