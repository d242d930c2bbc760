"""Task contexts: upsert, read, replace, delete, by-subtask and atomic sub-task results."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from memory_bodies import sub_task, task_body

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def client(tenant_client: httpx.AsyncClient) -> httpx.AsyncClient:
    """The module's shared service, as a tenant of this test's own (``conftest.py``)."""
    return tenant_client


BASE = "/v1/memory/task-context"


async def test_upsert_stores_the_record_and_returns_it_with_version_1(
    client: httpx.AsyncClient,
) -> None:
    body = task_body("t1", sub_tasks={"s1": sub_task("s1")}, state={"step": 1})
    r = await client.post(BASE, json=body)
    assert r.status_code == 200, r.text
    stored = r.json()
    assert stored["version"] == 1
    assert stored["data"] == {"topic": "solar"}
    assert stored["state"] == {"step": 1}
    assert stored["sub_tasks"]["s1"]["status"] == "pending"
    assert stored["response_topic"] == "action-results"
    got = (await client.get(f"{BASE}/t1")).json()
    assert got == stored


async def test_upsert_without_expected_version_bumps_the_version(
    client: httpx.AsyncClient,
) -> None:
    await client.post(BASE, json=task_body("t1"))
    r = await client.post(BASE, json=task_body("t1", state={"n": 2}, version=0))
    assert r.json()["version"] == 2
    assert r.json()["state"] == {"n": 2}


async def test_camel_case_input_is_accepted(client: httpx.AsyncClient) -> None:
    r = await client.post(
        BASE, json={"taskId": "t1", "eventType": "x.requested", "responseEvent": "x.done"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["response_event"] == "x.done"


async def test_put_replaces_an_existing_context_and_404s_for_a_missing_one(
    client: httpx.AsyncClient,
) -> None:
    await client.post(BASE, json=task_body("t1", sub_tasks={"s1": sub_task("s1")}))
    body = task_body("t1", sub_tasks={"s2": sub_task("s2")})
    del body["task_id"]
    r = await client.put(f"{BASE}/t1", json=body)
    assert r.status_code == 200, r.text
    assert list(r.json()["sub_tasks"]) == ["s2"]
    assert r.json()["version"] == 2
    missing = await client.put(f"{BASE}/nope", json=body)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "task_not_found"
    assert missing.json()["error"]["details"] == {"task_id": "nope"}


async def test_put_with_stale_if_match_is_a_version_conflict(client: httpx.AsyncClient) -> None:
    await client.post(BASE, json=task_body("t1"))
    await client.post(BASE, json=task_body("t1"))  # version 2
    stale = await client.put(f"{BASE}/t1", json=task_body("t1"), headers={"If-Match": "1"})
    assert stale.status_code == 409
    err = stale.json()["error"]
    assert err["code"] == "version_conflict"
    assert err["details"]["current_version"] == 2
    fresh = await client.put(f"{BASE}/t1", json=task_body("t1"), headers={"If-Match": '"2"'})
    assert fresh.status_code == 200
    assert fresh.json()["version"] == 3


async def test_expected_version_in_the_body_guards_upserts(client: httpx.AsyncClient) -> None:
    created = await client.post(BASE, json=task_body("t1", expected_version=0))
    assert created.status_code == 200
    again = await client.post(BASE, json=task_body("t1", expected_version=0))
    assert again.status_code == 409
    assert again.json()["error"]["details"] == {"expected_version": 0, "current_version": 1}
    ok = await client.post(BASE, json=task_body("t1", expected_version=1))
    assert ok.json()["version"] == 2
    assert "expected_version" not in ok.json()


async def test_concurrent_guarded_writes_lose_no_update(client: httpx.AsyncClient) -> None:
    """Ten writers race on version 1: exactly one wins, the rest get 409."""
    await client.post(BASE, json=task_body("t1"))
    rs = await asyncio.gather(
        *(
            client.put(
                f"{BASE}/t1", json=task_body("t1", state={"writer": i}), headers={"If-Match": "1"}
            )
            for i in range(10)
        )
    )
    assert sorted(r.status_code for r in rs) == [200] + [409] * 9
    winner = next(r for r in rs if r.status_code == 200).json()
    assert (await client.get(f"{BASE}/t1")).json()["state"] == winner["state"]


async def test_delete_removes_the_context_and_its_sub_task_index(
    client: httpx.AsyncClient,
) -> None:
    await client.post(BASE, json=task_body("t1", sub_tasks={"s1": sub_task("s1")}))
    assert (await client.delete(f"{BASE}/t1")).status_code == 204
    assert (await client.get(f"{BASE}/t1")).status_code == 404
    assert (await client.get(f"{BASE}/by-subtask/s1")).status_code == 404
    again = await client.delete(f"{BASE}/t1")
    assert again.status_code == 404
    assert again.json()["error"]["details"] == {"task_id": "t1"}


async def test_by_subtask_finds_the_owning_task(client: httpx.AsyncClient) -> None:
    await client.post(BASE, json=task_body("t1", sub_tasks={"a": sub_task("a")}))
    await client.post(BASE, json=task_body("t2", sub_tasks={"b": sub_task("b")}))
    r = await client.get(f"{BASE}/by-subtask/b")
    assert r.status_code == 200
    assert r.json()["task_id"] == "t2"
    missing = await client.get(f"{BASE}/by-subtask/zzz")
    assert missing.status_code == 404
    assert missing.json()["error"]["details"] == {"sub_task_id": "zzz"}
    assert "zzz" in missing.json()["error"]["message"]


async def test_sub_task_result_is_recorded_and_the_whole_context_returned(
    client: httpx.AsyncClient,
) -> None:
    subs = {"a": sub_task("a", group="g"), "b": sub_task("b", group="g")}
    await client.post(BASE, json=task_body("t1", sub_tasks=subs))
    r = await client.post(f"{BASE}/t1/sub-tasks/a/result", json={"result": {"score": 7}})
    assert r.status_code == 200, r.text
    ctx = r.json()
    assert ctx["version"] == 2
    assert ctx["sub_tasks"]["a"] == {
        **sub_task("a", group="g"),
        "status": "completed",
        "result": {"score": 7},
        "error": None,
    }
    assert ctx["sub_tasks"]["b"]["status"] == "pending"
    failed = await client.post(
        f"{BASE}/t1/sub-tasks/b/result", json={"status": "failed", "error": "timeout"}
    )
    assert failed.json()["sub_tasks"]["b"]["status"] == "failed"
    assert failed.json()["sub_tasks"]["b"]["error"] == "timeout"


async def test_sub_task_result_for_unknown_task_or_sub_task_is_404(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post(f"{BASE}/nope/sub-tasks/a/result", json={"result": {}})
    assert r.status_code == 404
    assert r.json()["error"]["details"] == {"task_id": "nope"}
    await client.post(BASE, json=task_body("t1", sub_tasks={"a": sub_task("a")}))
    r = await client.post(f"{BASE}/t1/sub-tasks/zz/result", json={"result": {}})
    assert r.status_code == 404
    assert r.json()["error"]["details"] == {"task_id": "t1", "sub_task_id": "zz"}
    # The failed attempt left the context untouched (its version bump rolled back).
    assert (await client.get(f"{BASE}/t1")).json()["version"] == 1


async def test_a_stale_whole_record_save_does_not_erase_a_recorded_result(
    client: httpx.AsyncClient,
) -> None:
    """A worker saving its older in-memory copy must not undo fan-in."""
    body = task_body("t1", sub_tasks={"a": sub_task("a"), "b": sub_task("b")})
    await client.post(BASE, json=body)
    await client.post(f"{BASE}/t1/sub-tasks/a/result", json={"result": {"v": 1}})
    r = await client.post(BASE, json={**body, "state": {"saved": True}})
    assert r.json()["sub_tasks"]["a"]["status"] == "completed"
    assert r.json()["sub_tasks"]["a"]["result"] == {"v": 1}
    assert r.json()["state"] == {"saved": True}


async def test_sub_task_keys_must_match_their_ids(client: httpx.AsyncClient) -> None:
    r = await client.post(BASE, json=task_body("t1", sub_tasks={"a": sub_task("b")}))
    assert r.status_code == 422
    assert r.json()["error"]["details"][0]["field"] == "sub_tasks.a.sub_task_id"


async def test_put_body_id_must_match_the_path(client: httpx.AsyncClient) -> None:
    await client.post(BASE, json=task_body("t1"))
    r = await client.put(f"{BASE}/t1", json=task_body("t2"))
    assert r.status_code == 422
    assert "task_id" in r.json()["error"]["message"]
