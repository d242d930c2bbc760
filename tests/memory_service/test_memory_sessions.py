"""Sessions group plans; their summaries count plans and track the latest activity."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.asyncio

SESSIONS = "/v1/memory/sessions"
PLANS = "/v1/memory/plans"


async def test_create_session_generates_an_id(client: httpx.AsyncClient) -> None:
    r = await client.post(SESSIONS, json={"name": "budget", "metadata": {"lang": "en"}})
    assert r.status_code == 201, r.text
    s = r.json()
    assert s["session_id"]
    assert (s["name"], s["metadata"], s["plan_count"]) == ("budget", {"lang": "en"}, 0)
    assert s["last_activity"] == s["created_at"]
    assert (await client.get(f"{SESSIONS}/{s['session_id']}")).json() == s


async def test_session_summary_counts_plans_and_tracks_last_activity(
    client: httpx.AsyncClient,
) -> None:
    created = (await client.post(SESSIONS, json={"session_id": "s1"})).json()
    await client.post(PLANS, json={"plan_id": "a", "goal_event": "g", "session_id": "s1"})
    await client.post(PLANS, json={"plan_id": "b", "goal_event": "g", "session_id": "s1"})
    await client.post(PLANS, json={"plan_id": "c", "goal_event": "g", "session_id": "s2"})
    touched = (await client.put(f"{PLANS}/a", json={"status": "running"})).json()
    s = (await client.get(f"{SESSIONS}/s1")).json()
    assert s["plan_count"] == 2
    assert s["last_activity"] == touched["updated_at"]
    assert s["last_activity"] > created["last_activity"]


async def test_list_sessions_newest_first_with_limit(client: httpx.AsyncClient) -> None:
    for sid in ("s1", "s2", "s3"):
        await client.post(SESSIONS, json={"session_id": sid})
    await client.post(PLANS, json={"plan_id": "a", "goal_event": "g", "session_id": "s2"})
    r = await client.get(SESSIONS)
    listed = r.json()["sessions"]
    assert [s["session_id"] for s in listed] == ["s3", "s2", "s1"]
    assert [s["plan_count"] for s in listed] == [0, 1, 0]
    assert len((await client.get(SESSIONS, params={"limit": 1})).json()["sessions"]) == 1


async def test_duplicate_session_id_is_409(client: httpx.AsyncClient) -> None:
    await client.post(SESSIONS, json={"session_id": "s1"})
    r = await client.post(SESSIONS, json={"session_id": "s1"})
    assert r.status_code == 409
    assert r.json()["error"]["details"] == {"session_id": "s1"}


async def test_delete_session_removes_it_and_its_plans(client: httpx.AsyncClient) -> None:
    await client.post(SESSIONS, json={"session_id": "s1"})
    await client.post(PLANS, json={"plan_id": "a", "goal_event": "g", "session_id": "s1"})
    await client.post(PLANS, json={"plan_id": "b", "goal_event": "g", "session_id": "s2"})
    await client.post("/v1/working-memory/a", json={"key": "k", "value": 1})
    assert (await client.delete(f"{SESSIONS}/s1")).status_code == 204
    missing = await client.get(f"{SESSIONS}/s1")
    assert missing.status_code == 404
    assert missing.json()["error"] == {
        "code": "session_not_found",
        "message": "session 's1' not found",
        "details": {"session_id": "s1"},
    }
    assert (await client.get(f"{PLANS}/a")).status_code == 404
    assert (await client.get(f"{PLANS}/b")).status_code == 200
    assert (await client.get("/v1/working-memory/a")).json()["items"] == []
    assert (await client.delete(f"{SESSIONS}/s1")).status_code == 404
