"""Migrations at start-up (idempotent, data survives restarts) and retention pruning."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from memory_bodies import plan_body

from memory_service.retention import prune_finished_plans
from memory_service.settings import Settings
from memory_service.sql import MIGRATIONS, VERSION_TABLE, open_sql_store
from memory_service.sql.base import utcnow
from servicekit.db import make_engine

pytestmark = pytest.mark.asyncio


async def test_restart_runs_migrations_again_and_keeps_data(make_client: Any) -> None:
    async with make_client() as client:
        await client.post("/v1/memory/plan-context", json=plan_body("p1", correlation_ids=["c"]))
        await client.post("/v1/working-memory/p1", json={"key": "k", "value": [1, 2]})
    for _ in range(2):
        async with make_client() as client:
            assert (await client.get("/v1/memory/plan-context/by-correlation/c")).status_code == 200
            assert (await client.get("/v1/working-memory/p1/k")).json()["value"] == [1, 2]


async def test_schema_comes_from_alembic_with_its_own_version_table(db_url: str) -> None:
    # Opening the store twice runs the migrations twice: the second run is a no-op.
    await (await open_sql_store(db_url)).close()
    store = await open_sql_store(db_url)
    try:
        async with store.engine.connect() as conn:
            tables = await conn.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
            head = (await conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}"))).all()
    finally:
        await store.close()
    assert VERSION_TABLE in tables
    assert {
        "memory_task_contexts",
        "memory_sub_tasks",
        "memory_plans",
        "memory_plan_correlations",
        "memory_sessions",
        "memory_working_memory",
    } <= tables
    assert [row[0] for row in head] == ["0008_keyword_function"]


def _upgrade_to(connection: sa.Connection, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    config.attributes["version_table"] = VERSION_TABLE
    command.upgrade(config, revision)


async def test_upgrade_copies_existing_correlation_ids_into_the_plan_rows(db_url: str) -> None:
    # A database written by the first schema: correlation ids only in the side table.
    engine = make_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade_to, "0001_initial")
            await conn.execute(
                sa.text(
                    "INSERT INTO memory_plans (tenant_id, plan_id, goal_event, goal_data, status, "
                    "state_machine, results, state, version, created_at, updated_at) VALUES "
                    "('t', 'old', 'g', '{}', 'running', '{}', '{}', '{}', 3, :now, :now), "
                    "('t', 'bare', 'g', '{}', 'running', '{}', '{}', '{}', 1, :now, :now)"
                ),
                {"now": utcnow()},
            )
            await conn.execute(
                sa.text(
                    "INSERT INTO memory_plan_correlations (tenant_id, plan_id, correlation_id, "
                    "position) VALUES ('t', 'old', 'second', 1), ('t', 'old', 'first', 0)"
                )
            )
    finally:
        await engine.dispose()
    store = await open_sql_store(db_url)
    try:
        old = await store.get_plan("t", "old")
        assert (old.correlation_ids, old.version) == (["first", "second"], 3)
        assert (await store.get_plan("t", "bare")).correlation_ids == []
        assert (await store.get_plan_by_correlation("t", "second")).plan_id == "old"
    finally:
        await store.close()


async def _plan(client: httpx.AsyncClient, plan_id: str, status: str) -> None:
    r = await client.post(
        "/v1/memory/plan-context",
        json=plan_body(plan_id, status=status, correlation_ids=[f"c-{plan_id}"]),
    )
    assert r.status_code == 200
    await client.post(f"/v1/working-memory/{plan_id}", json={"key": "k", "value": 1})
    await client.post(
        "/v1/memory/task-context", json={"task_id": f"t-{plan_id}", "plan_id": plan_id}
    )


async def test_retention_prunes_only_old_finished_plans(
    make_client: Any, make_settings: Callable[..., Settings]
) -> None:
    async with make_client() as client:
        for plan_id, status in [
            ("done", "completed"),
            ("broken", "failed"),
            ("stopped", "cancelled"),
            ("busy", "running"),
            ("waiting", "paused"),
            ("new", "pending"),
        ]:
            await _plan(client, plan_id, status)
        await client.post(
            "/v1/memory/plan-context",
            json=plan_body("other-tenant", status="completed"),
            headers={"X-Tenant-ID": "t2"},
        )

    store = await open_sql_store(make_settings().memory_database_url or "")
    try:
        # Nothing is old enough yet.
        assert await prune_finished_plans(store, retention_days=30) == 0
        later = utcnow() + timedelta(days=31)
        assert await prune_finished_plans(store, retention_days=30, now=later) == 4
    finally:
        await store.close()

    async with make_client() as client:
        for gone in ("done", "broken", "stopped"):
            assert (await client.get(f"/v1/memory/plans/{gone}")).status_code == 404
            assert (await client.get(f"/v1/working-memory/{gone}")).json()["items"] == []
            assert (await client.get(f"/v1/memory/task-context/t-{gone}")).status_code == 404
            by_corr = await client.get(f"/v1/memory/plan-context/by-correlation/c-{gone}")
            assert by_corr.status_code == 404
        for kept in ("busy", "waiting", "new"):
            assert (await client.get(f"/v1/memory/plans/{kept}")).status_code == 200
            assert len((await client.get(f"/v1/working-memory/{kept}")).json()["items"]) == 1
            assert (await client.get(f"/v1/memory/task-context/t-{kept}")).status_code == 200
        other = await client.get("/v1/memory/plans/other-tenant", headers={"X-Tenant-ID": "t2"})
        assert other.status_code == 404


async def test_the_lifespan_pruner_runs_at_start_up(make_client: Any) -> None:
    async with make_client(memory_retention_days=0) as client:  # pruning disabled
        await _plan(client, "done", "completed")
        await _plan(client, "busy", "running")
        assert (await client.get("/v1/memory/plans/done")).status_code == 200
    # ~0.1 ms retention: by the next start-up the finished plan is old enough.
    async with make_client(memory_retention_days=1e-9) as client:
        for _ in range(500):
            if (await client.get("/v1/memory/plans/done")).status_code == 404:
                break
            await asyncio.sleep(0.01)
        assert (await client.get("/v1/memory/plans/done")).status_code == 404
        assert (await client.get("/v1/memory/plans/busy")).status_code == 200


# Only a database server drops connections: this runs on PostgreSQL alone.
@pytest.mark.parametrize(
    "db_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_reads_survive_the_database_dropping_connections(
    db_url: str, make_client: Any
) -> None:
    # The pool does not ping connections before use (three round trips per request on
    # asyncpg); a read on a connection the server closed is retried on a fresh one.
    import asyncpg

    async with make_client() as client:
        body = plan_body("p1", correlation_ids=["c"])
        r = await client.post("/v1/memory/plan-context", json=body)
        assert r.status_code == 200
        assert (await client.get("/v1/memory/plan-context/p1")).status_code == 200
        admin = await asyncpg.connect(db_url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            killed = await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE usename = current_user AND pid <> pg_backend_pid()"
            )
        finally:
            await admin.close()
        assert killed >= 1
        assert (await client.get("/v1/memory/plan-context/p1")).json()["version"] == 1
        assert (await client.get("/v1/memory/plan-context/by-correlation/c")).status_code == 200
        # Writes then run on fresh connections (the pool replaced the dropped ones).
        r = await client.put(
            "/v1/memory/plan-context/p1", json=plan_body("p1"), headers={"If-Match": "1"}
        )
        assert r.status_code == 200


async def test_the_start_up_heap_is_frozen_once_a_process(make_client: Any) -> None:
    # A long-lived service freezes what it built at start-up out of the collector; a
    # process that starts many apps (this suite, the harness) must not pay a full
    # collection per app nor freeze each one's soon-to-be garbage.
    async with make_client() as client:
        assert (await client.get("/health")).status_code == 200
    frozen = gc.get_freeze_count()
    async with make_client() as client:
        assert (await client.get("/health")).status_code == 200
    # Not frozen again: the count would grow by the new app's heap (hundreds of thousands
    # of objects). It may shrink: a frozen object that dies leaves the permanent
    # generation (in a suite, what earlier tests' apps left in caches, released meanwhile).
    assert gc.get_freeze_count() <= frozen
