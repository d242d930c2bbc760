"""Long-term memory housekeeping: forget a user, retention, the embedding model and
re-embedding, a provider that is down."""

from __future__ import annotations

import asyncio
import socket
from datetime import timedelta

import httpx
import pytest

from memory_service.embeddings import make_embedder
from memory_service.longterm.service import LongTermMemory
from memory_service.longterm.store import LongTermStore
from memory_service.retention import prune_long_term
from memory_service.sql import open_sql_store
from memory_service.sql.base import utcnow

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}
A2 = {"X-Tenant-ID": "tenant-a", "X-User-ID": "bob"}
B = {"X-Tenant-ID": "tenant-b", "X-User-ID": "alice"}
SERVICE = {"X-Tenant-ID": "tenant-a", "X-User-ID": "ops", "X-Soorma-Role": "service"}


async def _seed_user(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    calls = [
        ("/v1/memory/semantic", {"content": "likes green tea"}),
        ("/v1/memory/semantic", {"content": "lives in porto", "public": True}),
        ("/v1/memory/episodes", {"agent_id": "a", "role": "user", "content": "hello"}),
        ("/v1/memory/procedures", {"kind": "rule", "content": "r", "situation": "s"}),
    ]
    for path, body in calls:
        r = await client.post(path, json=body, headers=headers)
        assert r.status_code == 201, r.text


async def test_forget_deletes_every_type_for_that_user_only(
    lt_client: httpx.AsyncClient,
) -> None:
    await _seed_user(lt_client, A)
    await _seed_user(lt_client, A2)
    await _seed_user(lt_client, B)
    r = await lt_client.delete("/v1/memory/users/alice", headers=A2)
    assert r.status_code == 403
    r = await lt_client.delete("/v1/memory/users/alice", headers=A)
    assert r.status_code == 200, r.text
    assert r.json() == {"user_id": "alice", "semantic": 2, "episodic": 1, "procedural": 1}
    # Alice now sees only Bob's public record.
    left = (await lt_client.get("/v1/memory/semantic", headers=A)).json()
    assert [(r["user_id"], r["public"]) for r in left] == [("bob", True)]
    # Bob's and tenant B's alice's records are untouched.
    assert len((await lt_client.get("/v1/memory/semantic", headers=A2)).json()) == 2
    assert len((await lt_client.get("/v1/memory/semantic", headers=B)).json()) == 2
    # A platform service may forget any user of the tenant it acts for.
    r = await lt_client.delete("/v1/memory/users/bob", headers=SERVICE)
    assert r.json() == {"user_id": "bob", "semantic": 2, "episodic": 1, "procedural": 1}
    assert (await lt_client.get("/v1/memory/semantic", headers=A2)).json() == []
    assert len((await lt_client.get("/v1/memory/semantic", headers=B)).json()) == 2


async def test_retention_prunes_each_type_by_its_own_age(make_lt_client, lt_db_url: str) -> None:
    async with make_lt_client() as client:
        await _seed_user(client, A)
        await _seed_user(client, B)
    store = await open_sql_store(lt_db_url)
    try:
        memory = LongTermMemory(
            await LongTermStore.open(store.engine),
            make_embedder("deterministic/256"),
            reembed_batch=10,
        )
        retention = {"memory_episodes": 1.0, "memory_procedures": 30.0}
        later = utcnow() + timedelta(days=2)
        pruned = await prune_long_term(memory, retention, now=later)
        assert pruned == {"memory_episodes": 2, "memory_procedures": 0}
        pruned = await prune_long_term(memory, retention, now=utcnow() + timedelta(days=31))
        assert pruned == {"memory_episodes": 0, "memory_procedures": 2}
    finally:
        await store.close()
    async with make_lt_client() as client:
        for headers in (A, B):
            assert len((await client.get("/v1/memory/semantic", headers=headers)).json()) == 2
            r = await client.get("/v1/memory/episodes/recent?agent_id=a", headers=headers)
            assert r.json() == []


async def test_model_change_then_reembed_while_search_keeps_answering(make_lt_client) -> None:
    async with make_lt_client(embedding_model="deterministic/32") as client:
        await _seed_user(client, A)
        for i in range(25):
            r = await client.post(
                "/v1/memory/semantic", json={"content": f"note {i} about kiwis"}, headers=A
            )
            assert r.status_code == 201
        info = (await client.get("/v1/memory/embedding", headers=A)).json()
        assert info == {
            "model": "deterministic/32",
            "dimensions": 32,
            "provider": "deterministic",
            "records_on_other_models": 0,
        }

    async with make_lt_client(embedding_model="deterministic/64", reembed_batch_size=7) as client:
        info = (await client.get("/v1/memory/embedding", headers=A)).json()
        assert (info["model"], info["records_on_other_models"]) == ("deterministic/64", 29)
        # Old vectors take no part in vector ranking, but keyword search still finds them.
        body = {"query": "kiwis", "limit": 50}
        hybrid = (await client.post("/v1/memory/semantic/search", json=body, headers=A)).json()
        assert len(hybrid["hits"]) == 25
        assert all(h["vector_score"] is None for h in hybrid["hits"])
        vector = await client.post(
            "/v1/memory/semantic/search", json={**body, "mode": "vector"}, headers=A
        )
        assert vector.json()["hits"] == []

        r = await client.post("/v1/memory/reembed", headers=A)
        assert r.status_code == 403
        r = await client.post("/v1/memory/reembed", headers=SERVICE)
        assert r.status_code == 202, r.text
        assert r.json()["total"] == 29
        for _ in range(200):
            status = (await client.get("/v1/memory/reembed", headers=A)).json()
            if status["state"] != "running":
                break
            # Search answers while the re-embed runs.
            r = await client.post("/v1/memory/semantic/search", json=body, headers=A)
            assert r.status_code == 200
            await asyncio.sleep(0.02)
        assert status == {
            "model": "deterministic/64",
            "state": "done",
            "done": 29,
            "total": 29,
            "error": None,
        }
        info = (await client.get("/v1/memory/embedding", headers=A)).json()
        assert info["records_on_other_models"] == 0
        vector = await client.post(
            "/v1/memory/semantic/search", json={**body, "mode": "vector"}, headers=A
        )
        hits = vector.json()["hits"]
        assert sum("kiwis" in h["record"]["content"] for h in hits) == 25
        assert {h["record"]["embedding_model"] for h in hits} == {"deterministic/64"}
        r = await client.post("/v1/memory/procedures/relevant", json={"query": "s"}, headers=A)
        assert len(r.json()["hits"]) == 1
        r = await client.post(
            "/v1/memory/episodes/search", json={"agent_id": "a", "query": "hello"}, headers=A
        )
        assert len(r.json()["hits"]) == 1


async def test_precomputed_embedding_must_match_the_model(lt_client: httpx.AsyncClient) -> None:
    r = await lt_client.post(
        "/v1/memory/semantic", json={"content": "x", "embedding": [0.1] * 3}, headers=A
    )
    assert r.status_code == 422
    message = r.json()["error"]["message"]
    assert "deterministic/256" in message and "256" in message and "3 dimensions" in message
    r = await lt_client.post(
        "/v1/memory/semantic", json={"content": "x", "embedding": [0.1] * 256}, headers=A
    )
    assert r.status_code == 201, r.text


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_provider_down_is_a_503_naming_it_and_stores_nothing(make_lt_client) -> None:
    port = _closed_port()
    settings = {
        "embedding_model": "openai/text-embedding-3-small",
        "embedding_api_base": f"http://127.0.0.1:{port}/v1",
        "embedding_api_key": "test-key",
        "embedding_dimensions": 8,
        "embedding_retries": 1,
        "embedding_timeout_seconds": 2.0,
    }
    async with make_lt_client(**settings) as client:
        calls = [
            ("/v1/memory/semantic", {"content": "fact"}),
            ("/v1/memory/semantic/batch", {"items": [{"content": "a"}, {"content": "b"}]}),
            ("/v1/memory/semantic/documents", {"external_id": "d", "content": "doc text"}),
            ("/v1/memory/semantic/search", {"query": "fact"}),
            ("/v1/memory/episodes", {"agent_id": "a", "role": "user", "content": "hi"}),
            ("/v1/memory/procedures", {"kind": "rule", "content": "r", "situation": "s"}),
        ]
        for path, body in calls:
            r = await client.post(path, json=body, headers=A)
            assert r.status_code == 503, (path, r.text)
            error = r.json()["error"]
            assert error["code"] == "embedding_unavailable"
            assert "openai" in error["message"] and "text-embedding-3-small" in error["message"]
            assert str(port) in error["message"]
        # A precomputed vector needs no provider.
        r = await client.post(
            "/v1/memory/semantic", json={"content": "given", "embedding": [1.0] * 8}, headers=A
        )
        assert r.status_code == 201, r.text
        listed = (await client.get("/v1/memory/semantic", headers=A)).json()
        assert [rec["content"] for rec in listed] == ["given"]
        r = await client.get("/v1/memory/episodes/recent?agent_id=a", headers=A)
        assert r.json() == []
