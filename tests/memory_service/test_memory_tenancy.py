"""Tenant isolation: tenant B can neither see nor touch tenant A's records (404, not 403)."""

from __future__ import annotations

import httpx
import pytest
from memory_bodies import plan_body, sub_task, task_body

from memory_service.settings import Settings
from servicekit.auth import issue_token

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a"}
B = {"X-Tenant-ID": "tenant-b"}


async def _seed_tenant_a(client: httpx.AsyncClient) -> None:
    calls = [
        ("/v1/memory/task-context", task_body("t1", sub_tasks={"s1": sub_task("s1")})),
        ("/v1/memory/plan-context", plan_body("p1", correlation_ids=["c1"], session_id="s1")),
        ("/v1/memory/sessions", {"session_id": "s1"}),
        ("/v1/working-memory/p1", {"key": "k", "value": "secret"}),
    ]
    for path, body in calls:
        r = await client.post(path, json=body, headers=A)
        assert r.status_code in (200, 201), r.text


async def test_other_tenant_cannot_read_any_record(client: httpx.AsyncClient) -> None:
    await _seed_tenant_a(client)
    for path in (
        "/v1/memory/task-context/t1",
        "/v1/memory/task-context/by-subtask/s1",
        "/v1/memory/plan-context/p1",
        "/v1/memory/plan-context/by-correlation/c1",
        "/v1/memory/plan-context/by-correlation/p1",
        "/v1/memory/plans/p1",
        "/v1/memory/sessions/s1",
        "/v1/working-memory/p1/k",
    ):
        assert (await client.get(path, headers=B)).status_code == 404, path
        assert (await client.get(path, headers=A)).status_code == 200, path


async def test_other_tenant_lists_are_empty(client: httpx.AsyncClient) -> None:
    await _seed_tenant_a(client)
    assert (await client.get("/v1/memory/plans", headers=B)).json() == {"plans": []}
    assert (await client.get("/v1/memory/sessions", headers=B)).json() == {"sessions": []}
    assert (await client.get("/v1/working-memory/p1", headers=B)).json() == {"items": []}
    assert len((await client.get("/v1/memory/plans", headers=A)).json()["plans"]) == 1


async def test_other_tenant_cannot_modify_or_delete(client: httpx.AsyncClient) -> None:
    await _seed_tenant_a(client)
    writes = [
        ("PUT", "/v1/memory/task-context/t1", task_body("t1")),
        ("POST", "/v1/memory/task-context/t1/sub-tasks/s1/result", {"result": {"x": 1}}),
        ("PUT", "/v1/memory/plan-context/p1", plan_body("p1")),
        ("PUT", "/v1/memory/plans/p1", {"status": "cancelled"}),
        ("DELETE", "/v1/memory/task-context/t1", None),
        ("DELETE", "/v1/memory/plan-context/p1", None),
        ("DELETE", "/v1/memory/plans/p1", None),
        ("DELETE", "/v1/memory/sessions/s1", None),
        ("DELETE", "/v1/working-memory/p1/k", None),
    ]
    for method, path, body in writes:
        r = await client.request(method, path, json=body, headers=B)
        assert r.status_code == 404, (method, path, r.text)
    assert (await client.delete("/v1/working-memory/p1", headers=B)).json() == {"deleted": 0}

    # Same ids in tenant B are separate records, and tenant A's are untouched.
    await client.post("/v1/memory/task-context", json=task_body("t1"), headers=B)
    await client.post("/v1/working-memory/p1", json={"key": "k", "value": "b"}, headers=B)
    task = (await client.get("/v1/memory/task-context/t1", headers=A)).json()
    assert (task["version"], task["sub_tasks"]["s1"]["status"]) == (1, "pending")
    assert (await client.get("/v1/memory/plans/p1", headers=A)).json()["status"] == "running"
    assert (await client.get("/v1/working-memory/p1/k", headers=A)).json()["value"] == "secret"
    assert (await client.get("/v1/memory/sessions/s1", headers=A)).status_code == 200


async def test_jwt_mode_scopes_records_to_the_tokens_tenant(make_client: object) -> None:
    secret = "test-only-signing-key-0123456789abcdef"
    settings = Settings(jwt_secret=secret)
    token_a = issue_token(settings, tenant_id="tenant-a", user_id="u1")
    token_b = issue_token(settings, tenant_id="tenant-b", user_id="u2")
    async with make_client(auth_mode="jwt", jwt_secret=secret) as client:  # type: ignore[operator]
        auth_a = {"Authorization": f"Bearer {token_a}"}
        auth_b = {"Authorization": f"Bearer {token_b}"}
        r = await client.post(
            "/v1/working-memory/p1", json={"key": "k", "value": 1}, headers=auth_a
        )
        assert r.status_code == 200
        assert (await client.get("/v1/working-memory/p1/k", headers=auth_b)).status_code == 404
        assert (await client.get("/v1/working-memory/p1/k")).status_code == 401
        spoofed = await client.get(
            "/v1/working-memory/p1/k", headers={**auth_b, "X-Tenant-ID": "tenant-a"}
        )
        assert spoofed.status_code == 403
