"""Semantic memory: upsert and de-duplication, documents, hybrid search, visibility.

Every test runs on SQLite and on PostgreSQL with pgvector, with the deterministic
embedder (hashed words: texts sharing words are similar).
"""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}
A2 = {"X-Tenant-ID": "tenant-a", "X-User-ID": "bob"}
B = {"X-Tenant-ID": "tenant-b", "X-User-ID": "alice"}


async def _add(client: httpx.AsyncClient, headers: dict[str, str], **body: object) -> dict:
    r = await client.post("/v1/memory/semantic", json=body, headers=headers)
    assert r.status_code in (200, 201), r.text
    return r.json()


async def _search(client: httpx.AsyncClient, headers: dict[str, str], **body: object) -> dict:
    r = await client.post("/v1/memory/semantic/search", json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


async def test_upsert_by_external_id_updates_in_place(lt_client: httpx.AsyncClient) -> None:
    r = await lt_client.post(
        "/v1/memory/semantic",
        json={"content": "refunds take 5 days", "external_id": "policy-1", "tags": ["policy"]},
        headers=A,
    )
    assert r.status_code == 201, r.text
    first = r.json()
    r = await lt_client.post(
        "/v1/memory/semantic",
        json={"content": "refunds take 3 days", "external_id": "policy-1", "source": "wiki"},
        headers=A,
    )
    assert r.status_code == 200, r.text
    second = r.json()
    assert second["id"] == first["id"]
    assert (second["content"], second["source"], second["tags"]) == (
        "refunds take 3 days",
        "wiki",
        [],
    )
    listed = (await lt_client.get("/v1/memory/semantic?external_id=policy-1", headers=A)).json()
    assert [r["id"] for r in listed] == [first["id"]]
    # The new text is what search finds.
    hits = (await _search(lt_client, A, query="3 days", mode="vector"))["hits"]
    assert hits[0]["record"]["content"] == "refunds take 3 days"


async def test_same_content_is_deduplicated_per_user(lt_client: httpx.AsyncClient) -> None:
    r1 = await lt_client.post("/v1/memory/semantic", json={"content": "the sky is blue"}, headers=A)
    r2 = await lt_client.post("/v1/memory/semantic", json={"content": "the sky is blue"}, headers=A)
    assert (r1.status_code, r2.status_code) == (201, 200)
    assert r1.json()["id"] == r2.json()["id"]
    assert r1.json()["content_hash"] == r2.json()["content_hash"]
    assert len(r1.json()["content_hash"]) == 64
    # Another user (same tenant) gets their own record.
    r3 = await lt_client.post(
        "/v1/memory/semantic", json={"content": "the sky is blue"}, headers=A2
    )
    assert r3.status_code == 201 and r3.json()["id"] != r1.json()["id"]


async def test_batch_stores_in_order_and_dedupes(lt_client: httpx.AsyncClient) -> None:
    items = [{"content": f"fact number {i}"} for i in range(30)] + [{"content": "fact number 3"}]
    r = await lt_client.post("/v1/memory/semantic/batch", json={"items": items}, headers=A)
    assert r.status_code == 200, r.text
    records = r.json()
    assert [rec["content"] for rec in records] == [item["content"] for item in items]
    assert records[-1]["id"] == records[3]["id"]
    listed = (await lt_client.get("/v1/memory/semantic?limit=1000", headers=A)).json()
    assert len(listed) == 30


async def test_document_chunks_are_replaced_together(lt_client: httpx.AsyncClient) -> None:
    text_v1 = " ".join(f"alpha{i}" for i in range(300))
    r = await lt_client.post(
        "/v1/memory/semantic/documents",
        json={"external_id": "manual", "content": text_v1, "chunk_size": 400, "chunk_overlap": 50},
        headers=A,
    )
    assert r.status_code == 201, r.text
    chunks = r.json()
    assert len(chunks) > 3
    assert [c["external_id"] for c in chunks] == [f"manual#{i}" for i in range(len(chunks))]
    assert {c["parent_external_id"] for c in chunks} == {"manual"}
    assert [c["chunk_index"] for c in chunks] == list(range(len(chunks)))

    r = await lt_client.post(
        "/v1/memory/semantic/documents",
        json={"external_id": "manual", "content": "beta one. beta two.", "chunk_size": 400},
        headers=A,
    )
    assert r.status_code == 201, r.text
    listed = (
        await lt_client.get("/v1/memory/semantic?parent_external_id=manual", headers=A)
    ).json()
    assert [c["content"] for c in listed] == ["beta one. beta two."]
    # No chunk of the old version is searchable any more.
    hits = (await _search(lt_client, A, query="alpha5 alpha6"))["hits"]
    assert all("alpha" not in h["record"]["content"] for h in hits)

    r = await lt_client.delete("/v1/memory/semantic/by-external-id/manual", headers=A)
    assert r.status_code == 204
    assert (await lt_client.get("/v1/memory/semantic", headers=A)).json() == []
    r = await lt_client.delete("/v1/memory/semantic/by-external-id/manual", headers=A)
    assert r.status_code == 404


async def test_get_and_delete_by_id(lt_client: httpx.AsyncClient) -> None:
    rec = await _add(lt_client, A, content="delete me")
    assert (await lt_client.get(f"/v1/memory/semantic/{rec['id']}", headers=A)).status_code == 200
    assert (
        await lt_client.delete(f"/v1/memory/semantic/{rec['id']}", headers=A2)
    ).status_code == 404
    assert (
        await lt_client.delete(f"/v1/memory/semantic/{rec['id']}", headers=A)
    ).status_code == 204
    r = await lt_client.get(f"/v1/memory/semantic/{rec['id']}", headers=A)
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "memory_not_found"


async def _seed_codes(client: httpx.AsyncClient) -> dict:
    target = await _add(client, A, content="Payment declined: error 402 from the card processor")
    for text in (
        "error error error in the login flow",
        "error error timeout",
        "error error error error",
        "error in search",
        "an error happened",
    ):
        await _add(client, A, content=text)
    return target


async def test_exact_code_is_found_by_keyword_in_hybrid_not_by_pure_vector(
    lt_client: httpx.AsyncClient,
) -> None:
    target = await _seed_codes(lt_client)
    hybrid = await _search(lt_client, A, query="error 402", limit=3)
    assert hybrid["mode"] == "hybrid"
    assert hybrid["embedding_model"] == "deterministic/256"
    top = hybrid["hits"][0]
    assert top["record"]["id"] == target["id"]
    assert top["keyword_rank"] == 1
    # Reciprocal-rank fusion: 1/(60 + vector rank) + 1/(60 + keyword rank).
    assert top["score"] > 1 / 61
    scores = [h["score"] for h in hybrid["hits"]]
    assert scores == sorted(scores, reverse=True)

    vector = await _search(lt_client, A, query="error 402", limit=3, mode="vector")
    assert vector["mode"] == "vector"
    ids = [h["record"]["id"] for h in vector["hits"]]
    assert len(ids) == 3 and target["id"] not in ids
    for hit in vector["hits"]:
        assert hit["score"] == pytest.approx(hit["vector_score"])
        assert 0 < hit["score"] <= 1 and hit["keyword_rank"] is None


async def test_min_score_applies_to_reported_score(lt_client: httpx.AsyncClient) -> None:
    await _seed_codes(lt_client)
    everything = await _search(lt_client, A, query="error 402", mode="vector", limit=50)
    assert len(everything["hits"]) == 6
    cut = everything["hits"][2]["score"]
    some = await _search(lt_client, A, query="error 402", mode="vector", min_score=cut)
    assert len(some["hits"]) == 3
    assert all(h["score"] >= cut for h in some["hits"])
    none = await _search(lt_client, A, query="error 402", min_score=0.5)  # hybrid < 2/61
    assert none["hits"] == []


async def test_filters_on_tags_source_and_metadata(lt_client: httpx.AsyncClient) -> None:
    await _add(
        lt_client,
        A,
        content="shipping to spain",
        tags=["shipping", "eu"],
        source="faq",
        metadata={"lang": "en", "version": 2, "draft": False},
    )
    await _add(
        lt_client,
        A,
        content="shipping to canada",
        tags=["shipping"],
        source="wiki",
        metadata={"lang": "en", "version": 1, "draft": True},
    )
    await _add(lt_client, A, content="shipping to japan", metadata={"lang": "ja", "version": "2"})

    async def contents(**filters: object) -> set[str]:
        found = await _search(lt_client, A, query="shipping", **filters)
        return {h["record"]["content"] for h in found["hits"]}

    assert await contents() == {"shipping to spain", "shipping to canada", "shipping to japan"}
    assert await contents(tags=["shipping", "eu"]) == {"shipping to spain"}
    assert await contents(tags=["shipping"]) == {"shipping to spain", "shipping to canada"}
    assert await contents(source="wiki") == {"shipping to canada"}
    assert await contents(metadata={"lang": "en"}) == {"shipping to spain", "shipping to canada"}
    # Equality includes the JSON type: 2 is not "2", false is not 0.
    assert await contents(metadata={"version": 2}) == {"shipping to spain"}
    assert await contents(metadata={"version": "2"}) == {"shipping to japan"}
    assert await contents(metadata={"draft": False}) == {"shipping to spain"}
    assert await contents(metadata={"lang": "en", "draft": True}) == {"shipping to canada"}
    listed = (await lt_client.get("/v1/memory/semantic?tag=eu&source=faq", headers=A)).json()
    assert [r["content"] for r in listed] == ["shipping to spain"]


async def test_private_public_and_user_isolation(lt_client: httpx.AsyncClient) -> None:
    private = await _add(lt_client, A, content="alice private note about rockets")
    public = await _add(lt_client, A, content="team handbook about rockets", public=True)

    def ids(result: dict) -> set[str]:
        return {h["record"]["id"] for h in result["hits"]}

    # Bob (same tenant) sees only the public one, and only when including public.
    assert ids(await _search(lt_client, A2, query="rockets")) == {public["id"]}
    assert ids(await _search(lt_client, A2, query="rockets", include_public=False)) == set()
    assert (
        await lt_client.get(f"/v1/memory/semantic/{private['id']}", headers=A2)
    ).status_code == 404
    assert (
        await lt_client.get(f"/v1/memory/semantic/{public['id']}", headers=A2)
    ).status_code == 200
    # Bob cannot delete Alice's public record.
    assert (
        await lt_client.delete(f"/v1/memory/semantic/{public['id']}", headers=A2)
    ).status_code == 404
    assert ids(await _search(lt_client, A, query="rockets")) == {private["id"], public["id"]}


async def test_other_tenant_never_sees_anything(lt_client: httpx.AsyncClient) -> None:
    private = await _add(lt_client, A, content="tenant a secret about rockets", external_id="x")
    public = await _add(lt_client, A, content="tenant a public rockets", public=True)
    for mode in ("hybrid", "vector"):
        assert (await _search(lt_client, B, query="rockets", mode=mode))["hits"] == []
    for record in (private, public):
        r = await lt_client.get(f"/v1/memory/semantic/{record['id']}", headers=B)
        assert r.status_code == 404
        r = await lt_client.delete(f"/v1/memory/semantic/{record['id']}", headers=B)
        assert r.status_code == 404
    assert (await lt_client.get("/v1/memory/semantic", headers=B)).json() == []
    r = await lt_client.delete("/v1/memory/semantic/by-external-id/x", headers=B)
    assert r.status_code == 404
    # Same external id in tenant B is a separate record.
    b = await _add(lt_client, B, content="tenant b own", external_id="x")
    assert b["id"] != private["id"]
    r = await lt_client.get(f"/v1/memory/semantic/{private['id']}", headers=A)
    assert r.json()["content"] == "tenant a secret about rockets"


async def test_a_question_sharing_only_some_words_still_gets_keyword_hits(
    lt_client: httpx.AsyncClient,
) -> None:
    """No record holds every word of a natural-language question: any word counts then."""
    policy = await _add(lt_client, A, content="Refunds are paid within 30 days of a return")
    await _add(lt_client, A, content="Shipping takes five working days")
    found = await _search(lt_client, A, query="how long until my refunds arrive", limit=2)
    ranked = {h["record"]["id"]: h["keyword_rank"] for h in found["hits"]}
    assert ranked.get(policy["id"]) == 1
