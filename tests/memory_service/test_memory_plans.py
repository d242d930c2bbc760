"""Plan contexts and plans: one record per plan, PlanSummary is its projection."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from memory_bodies import plan_body

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def client(tenant_client: httpx.AsyncClient) -> httpx.AsyncClient:
    """The module's shared service, as a tenant of this test's own (``conftest.py``)."""
    return tenant_client


CTX = "/v1/memory/plan-context"
PLANS = "/v1/memory/plans"


async def test_plan_context_upsert_and_read_back(client: httpx.AsyncClient) -> None:
    body = plan_body(
        "p1",
        state_machine={"start": {"next": "end"}},
        results={"a": 1},
        correlation_ids=["c1", "c2"],
        state={"k": "v"},
        session_id="s1",
    )
    r = await client.post(CTX, json=body)
    assert r.status_code == 200, r.text
    stored = r.json()
    assert stored["version"] == 1
    for key in ("state_machine", "results", "correlation_ids", "state", "session_id"):
        assert stored[key] == body[key]
    assert (await client.get(f"{CTX}/p1")).json() == stored
    again = await client.post(CTX, json={**body, "current_state": "end"})
    assert again.json()["version"] == 2
    assert again.json()["created_at"] == stored["created_at"]


async def test_plan_context_put_with_stale_version_is_409(client: httpx.AsyncClient) -> None:
    await client.post(CTX, json=plan_body("p1"))
    ok = await client.put(f"{CTX}/p1", json={**plan_body("p1"), "expected_version": 1})
    assert ok.status_code == 200
    stale = await client.put(f"{CTX}/p1", json=plan_body("p1"), headers={"If-Match": "1"})
    assert stale.status_code == 409
    assert stale.json()["error"]["details"]["current_version"] == 2
    missing = await client.put(f"{CTX}/p9", json=plan_body("p9"))
    assert missing.status_code == 404
    assert missing.json()["error"]["details"] == {"plan_id": "p9"}


async def test_plan_context_read_modify_write_retries_lose_no_update(
    client: httpx.AsyncClient,
) -> None:
    """Like the SDK helper: read, change, PUT with If-Match, retry on 409."""
    await client.post(CTX, json=plan_body("p1", results={}))

    async def add_result(step: str) -> None:
        while True:
            ctx = (await client.get(f"{CTX}/p1")).json()
            ctx["results"][step] = "done"
            r = await client.put(f"{CTX}/p1", json=ctx, headers={"If-Match": str(ctx["version"])})
            if r.status_code == 200:
                return
            assert r.status_code == 409

    await asyncio.gather(*(add_result(f"step{i}") for i in range(8)))
    final = (await client.get(f"{CTX}/p1")).json()
    assert final["results"] == {f"step{i}": "done" for i in range(8)}


async def test_by_correlation_finds_ids_added_in_a_later_upsert(
    client: httpx.AsyncClient,
) -> None:
    await client.post(CTX, json=plan_body("p1", correlation_ids=["c1"]))
    assert (await client.get(f"{CTX}/by-correlation/c2")).status_code == 404
    await client.post(CTX, json=plan_body("p1", correlation_ids=["c1", "c2"]))
    r = await client.get(f"{CTX}/by-correlation/c2")
    assert r.status_code == 200
    assert r.json()["plan_id"] == "p1"
    assert r.json()["correlation_ids"] == ["c1", "c2"]
    # The plan id itself is a correlation id too.
    assert (await client.get(f"{CTX}/by-correlation/p1")).json()["plan_id"] == "p1"
    # Ids dropped from the record stop matching.
    await client.post(CTX, json=plan_body("p1", correlation_ids=["c2"]))
    missing = await client.get(f"{CTX}/by-correlation/c1")
    assert missing.status_code == 404
    assert missing.json()["error"]["details"] == {"correlation_id": "c1"}


async def test_create_plan_generates_an_id_and_returns_a_summary(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post(
        PLANS, json={"goal_event": "g", "goal_data": {"x": 1}, "response_event": "g.done"}
    )
    assert r.status_code == 201, r.text
    summary = r.json()
    assert summary["plan_id"]
    assert summary["status"] == "pending"
    assert summary["version"] == 1
    assert set(summary) == {
        "plan_id",
        "goal_event",
        "status",
        "session_id",
        "parent_plan_id",
        "response_event",
        "version",
        "created_at",
        "updated_at",
    }
    # The plan's context is the same record, ready for the planner to fill in.
    ctx = (await client.get(f"{CTX}/{summary['plan_id']}")).json()
    assert ctx["goal_data"] == {"x": 1}
    assert (await client.get(f"{PLANS}/{summary['plan_id']}")).json() == summary


async def test_create_plan_with_an_existing_id_is_409(client: httpx.AsyncClient) -> None:
    assert (await client.post(PLANS, json={"plan_id": "p1", "goal_event": "g"})).status_code == 201
    r = await client.post(PLANS, json={"plan_id": "p1", "goal_event": "g"})
    assert r.status_code == 409
    assert r.json()["error"]["details"] == {"plan_id": "p1"}


async def test_list_plans_filters_by_status_session_and_parent(client: httpx.AsyncClient) -> None:
    await client.post(
        PLANS, json={"plan_id": "a", "goal_event": "g", "session_id": "s1", "status": "running"}
    )
    await client.post(
        PLANS,
        json={
            "plan_id": "b",
            "goal_event": "g",
            "session_id": "s1",
            "parent_plan_id": "a",
            "status": "paused",
        },
    )
    await client.post(
        PLANS, json={"plan_id": "c", "goal_event": "g", "session_id": "s2", "status": "completed"}
    )

    async def ids(**params: object) -> set[str]:
        r = await client.get(PLANS, params=params)  # type: ignore[arg-type]
        assert r.status_code == 200, r.text
        return {p["plan_id"] for p in r.json()["plans"]}

    assert await ids() == {"a", "b", "c"}
    assert await ids(status="running") == {"a"}
    assert await ids(status="running,paused") == {"a", "b"}
    assert await ids(status=["paused", "completed"]) == {"b", "c"}
    assert await ids(session_id="s1") == {"a", "b"}
    assert await ids(parent_plan_id="a") == {"b"}
    assert await ids(session_id="s1", status="paused") == {"b"}
    assert len(await ids(limit=2)) == 2
    bad = await client.get(PLANS, params={"status": "sleeping"})
    assert bad.status_code == 422
    assert "status" in bad.json()["error"]["message"]
    assert (await client.get(PLANS, params={"limit": 0})).status_code == 422


async def test_update_plan_status_bumps_version_and_honours_if_match(
    client: httpx.AsyncClient,
) -> None:
    await client.post(PLANS, json={"plan_id": "p1", "goal_event": "g"})
    r = await client.put(f"{PLANS}/p1", json={"status": "running"})
    assert r.status_code == 200
    assert (r.json()["status"], r.json()["version"]) == ("running", 2)
    stale = await client.put(f"{PLANS}/p1", json={"status": "paused", "expected_version": 1})
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "version_conflict"
    ok = await client.put(f"{PLANS}/p1", json={"status": "paused"}, headers={"If-Match": "2"})
    assert ok.json()["status"] == "paused"
    assert (await client.put(f"{PLANS}/nope", json={"status": "paused"})).status_code == 404


async def test_deleting_a_plan_removes_its_context_memory_and_tasks(
    client: httpx.AsyncClient,
) -> None:
    await client.post(CTX, json=plan_body("p1", correlation_ids=["c1"]))
    await client.post("/v1/working-memory/p1", json={"key": "k", "value": 1})
    await client.post("/v1/memory/task-context", json={"task_id": "t1", "plan_id": "p1"})
    await client.post("/v1/memory/task-context", json={"task_id": "t2", "plan_id": "other"})
    assert (await client.delete(f"{PLANS}/p1")).status_code == 204
    assert (await client.get(f"{CTX}/p1")).status_code == 404
    assert (await client.get(f"{CTX}/by-correlation/c1")).status_code == 404
    assert (await client.get("/v1/working-memory/p1")).json()["items"] == []
    assert (await client.get("/v1/memory/task-context/t1")).status_code == 404
    assert (await client.get("/v1/memory/task-context/t2")).status_code == 200
    again = await client.delete(f"{CTX}/p1")
    assert again.status_code == 404
    assert again.json()["error"]["code"] == "plan_not_found"


async def test_etag_carries_the_version_for_if_match(client: httpx.AsyncClient) -> None:
    created = await client.post(CTX, json=plan_body("p1"))
    assert created.headers["ETag"] == '"1"'
    got = await client.get(f"{CTX}/p1")
    assert got.headers["ETag"] == '"1"'
    put = await client.put(
        f"{CTX}/p1", json=plan_body("p1"), headers={"If-Match": got.headers["ETag"]}
    )
    assert put.status_code == 200
    assert put.headers["ETag"] == '"2"'
    assert (await client.get(f"{PLANS}/p1")).headers["ETag"] == '"2"'
    task = await client.post("/v1/memory/task-context", json={"task_id": "t1"})
    assert task.headers["ETag"] == '"1"'
