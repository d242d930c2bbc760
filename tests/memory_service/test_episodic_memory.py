"""Episodic memory: the recent-N window, search by meaning in a time range, privacy."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}
A2 = {"X-Tenant-ID": "tenant-a", "X-User-ID": "bob"}
B = {"X-Tenant-ID": "tenant-b", "X-User-ID": "alice"}


async def _log(
    client: httpx.AsyncClient, headers: dict[str, str], content: str, **extra: object
) -> dict:
    body = {"agent_id": "helper", "role": "user", "content": content, **extra}
    r = await client.post("/v1/memory/episodes", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


async def test_recent_window_is_the_last_n_in_chronological_order(
    lt_client: httpx.AsyncClient,
) -> None:
    for i in range(6):
        await _log(lt_client, A, f"message {i}", role="user" if i % 2 == 0 else "assistant")
    await _log(lt_client, A, "other agent", agent_id="other")
    r = await lt_client.get("/v1/memory/episodes/recent?agent_id=helper&limit=4", headers=A)
    assert r.status_code == 200, r.text
    assert [e["content"] for e in r.json()] == [f"message {i}" for i in range(2, 6)]
    assert [e["role"] for e in r.json()] == ["user", "assistant", "user", "assistant"]
    assert all(e["agent_id"] == "helper" and e["user_id"] == "alice" for e in r.json())


async def test_recent_window_by_session(lt_client: httpx.AsyncClient) -> None:
    await _log(lt_client, A, "in s1", session_id="s1")
    await _log(lt_client, A, "in s2", session_id="s2", plan_id="p1")
    r = await lt_client.get("/v1/memory/episodes/recent?agent_id=helper&session_id=s2", headers=A)
    assert [(e["content"], e["plan_id"]) for e in r.json()] == [("in s2", "p1")]


async def test_search_by_meaning_within_a_time_range(lt_client: httpx.AsyncClient) -> None:
    early = await _log(lt_client, A, "user said the invoice total was wrong")
    await _log(lt_client, A, "we talked about the weather")
    late = await _log(lt_client, A, "user asked again about the invoice total")

    async def search(**extra: object) -> list[str]:
        body = {"agent_id": "helper", "query": "invoice total", **extra}
        r = await lt_client.post("/v1/memory/episodes/search", json=body, headers=A)
        assert r.status_code == 200, r.text
        hits = r.json()["hits"]
        scores = [h["score"] for h in hits]
        assert scores == sorted(scores, reverse=True)
        return [h["record"]["id"] for h in hits]

    found = await search(limit=2)
    assert set(found) == {early["id"], late["id"]}
    assert await search(since=late["created_at"], limit=2) == [late["id"]]
    assert await search(until=late["created_at"], limit=1) == [early["id"]]
    assert await search(min_score=0.99) == []


async def test_episodes_are_private_to_user_agent_and_tenant(
    lt_client: httpx.AsyncClient,
) -> None:
    episode = await _log(lt_client, A, "alice told helper her address")
    for headers in (A2, B):
        r = await lt_client.get("/v1/memory/episodes/recent?agent_id=helper", headers=headers)
        assert r.json() == []
        r = await lt_client.post(
            "/v1/memory/episodes/search",
            json={"agent_id": "helper", "query": "address"},
            headers=headers,
        )
        assert r.json()["hits"] == []
        r = await lt_client.delete(f"/v1/memory/episodes/{episode['id']}", headers=headers)
        assert r.status_code == 404
    r = await lt_client.post(
        "/v1/memory/episodes/search", json={"agent_id": "other", "query": "address"}, headers=A
    )
    assert r.json()["hits"] == []
    assert (
        await lt_client.delete(f"/v1/memory/episodes/{episode['id']}", headers=A)
    ).status_code == 204
    r = await lt_client.get("/v1/memory/episodes/recent?agent_id=helper", headers=A)
    assert r.json() == []
