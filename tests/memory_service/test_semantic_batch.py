"""The batch ingest path (``POST /v1/memory/semantic/batch``) with precomputed vectors.

The store writes a batch with a fixed number of statements and builds the records it
answers from what it wrote (no read-back): these tests pin that the answer equals what a
later read returns, that de-duplication and upserts hold within a batch and against
stored rows, that a failing batch stores nothing, and that tenants and users stay apart.
Every test runs on SQLite and on PostgreSQL with pgvector.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from memory_service.longterm.store import ActiveModel, LongTermStore
from memory_service.sql import open_sql_store
from soorma_common.knowledge import SemanticMemoryCreate, deterministic_embedding

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}
A2 = {"X-Tenant-ID": "tenant-a", "X-User-ID": "bob"}
B = {"X-Tenant-ID": "tenant-b", "X-User-ID": "alice"}
DIMS = 256


def _item(content: str, **extra: Any) -> dict[str, Any]:
    return {"content": content, "embedding": deterministic_embedding(content, DIMS), **extra}


async def _batch(
    client: httpx.AsyncClient, headers: dict[str, str], items: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    r = await client.post("/v1/memory/semantic/batch", json={"items": items}, headers=headers)
    assert r.status_code == 200, r.text
    records: list[dict[str, Any]] = r.json()
    return records


async def _all(client: httpx.AsyncClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    r = await client.get("/v1/memory/semantic?limit=1000", headers=headers)
    assert r.status_code == 200, r.text
    records: list[dict[str, Any]] = r.json()
    return records


async def test_answered_records_equal_what_is_stored(lt_client: httpx.AsyncClient) -> None:
    items = [
        _item("invoices are sent monthly", tags=["billing"], metadata={"n": 1, "ok": True}),
        _item("parcels ship from Leeds", external_id="ship-1", source="wiki", public=True),
        _item("passwords rotate yearly", metadata={"team": "sec"}),
    ]
    answered = await _batch(lt_client, A, items)
    for record in answered:
        r = await lt_client.get(f"/v1/memory/semantic/{record['id']}", headers=A)
        assert r.status_code == 200, r.text
        assert r.json() == record
    assert [r["content"] for r in answered] == [i["content"] for i in items]
    # The precomputed vectors are what vector search ranks.
    r = await lt_client.post(
        "/v1/memory/semantic/search",
        json={"query": "parcels ship from Leeds", "mode": "vector", "limit": 1},
        headers=A,
    )
    assert r.json()["hits"][0]["record"]["id"] == answered[1]["id"]


async def test_dedupe_within_the_batch_and_against_stored_rows(
    lt_client: httpx.AsyncClient,
) -> None:
    [stored] = await _batch(lt_client, A, [_item("the sky is blue", tags=["first"])])
    answered = await _batch(
        lt_client,
        A,
        [
            _item("grass is green"),
            _item("the sky is blue", tags=["second"]),  # stored before: that record
            _item("grass is green", tags=["again"]),  # earlier in this batch
            _item("snow is white"),
        ],
    )
    assert answered[1] == stored  # the stored record, its tags included
    assert answered[2]["id"] == answered[0]["id"]
    assert answered[0]["tags"] == []
    assert len({r["id"] for r in answered}) == 3
    assert sorted(r["content"] for r in await _all(lt_client, A)) == [
        "grass is green",
        "snow is white",
        "the sky is blue",
    ]


async def test_upsert_by_external_id_within_the_batch_and_against_stored_rows(
    lt_client: httpx.AsyncClient,
) -> None:
    [old] = await _batch(lt_client, A, [_item("refunds take 5 days", external_id="p-1")])
    answered = await _batch(
        lt_client,
        A,
        [
            _item("refunds take 3 days", external_id="p-1", source="wiki"),
            _item("shipping is free", external_id="p-2"),
            _item("shipping costs 2 euros", external_id="p-2", tags=["price"]),
        ],
    )
    assert answered[0]["id"] == old["id"]
    assert answered[0]["created_at"] == old["created_at"]
    assert answered[0]["updated_at"] > old["updated_at"]
    assert (answered[0]["content"], answered[0]["source"]) == ("refunds take 3 days", "wiki")
    # The last write of an external id in a batch is what is stored (and answered).
    assert answered[1] == answered[2]
    assert (answered[2]["content"], answered[2]["tags"]) == ("shipping costs 2 euros", ["price"])
    stored = {r["external_id"]: r for r in await _all(lt_client, A)}
    assert stored == {"p-1": answered[0], "p-2": answered[2]}


async def test_a_failing_batch_stores_nothing(lt_client: httpx.AsyncClient) -> None:
    [kept] = await _batch(lt_client, A, [_item("kept as it was", external_id="k")])
    items = [
        _item("changed in a failed batch", external_id="k"),
        _item("new in a failed batch"),
        {"content": "wrong dimension", "embedding": [0.5, 0.25, 0.125]},
    ]
    r = await lt_client.post("/v1/memory/semantic/batch", json={"items": items}, headers=A)
    assert r.status_code == 422, r.text
    assert "dimensions" in r.text
    assert await _all(lt_client, A) == [kept]


async def test_a_database_error_mid_batch_rolls_the_whole_batch_back(lt_db_url: str) -> None:
    """The store alone: a statement failing after others of the batch ran undoes them."""
    sql = await open_sql_store(lt_db_url)
    try:
        store = await LongTermStore.open(sql.engine)
        model = ActiveModel("deterministic/256", DIMS)
        await store.prepare_model(model)

        def put(items: list[SemanticMemoryCreate]) -> Any:
            vectors = [deterministic_embedding(i.content, DIMS) for i in items]
            return store.semantic_put("tenant-a", "alice", items, vectors, model)

        [(kept, _)] = await put([SemanticMemoryCreate(content="as it was", external_id="k")])
        # Every new row gets the same id: the upserts (written first) succeed, the
        # de-duplicated insert that follows violates the primary key.
        store.new_id = lambda: "00000000-0000-4000-8000-000000000000"  # type: ignore[method-assign]
        with pytest.raises(IntegrityError):
            await put(
                [
                    SemanticMemoryCreate(content="changed", external_id="k"),
                    SemanticMemoryCreate(content="new keyed", external_id="k2"),
                    SemanticMemoryCreate(content="new plain"),
                ]
            )
        async with sql.engine.connect() as conn:
            rows = (await conn.execute(text("SELECT id, content FROM memory_semantic"))).all()
        assert [tuple(r) for r in rows] == [(kept.id, "as it was")]
    finally:
        await sql.engine.dispose()


async def test_tenants_and_users_never_share_batch_rows(lt_client: httpx.AsyncClient) -> None:
    items = [_item("shared words here"), _item("keyed text", external_id="same-key")]
    a = await _batch(lt_client, A, items)
    b = await _batch(lt_client, B, items)
    bob = await _batch(lt_client, A2, items)
    ids = [{r["id"] for r in batch} for batch in (a, b, bob)]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    # Tenant B's upsert of "same-key" did not touch tenant A's record.
    b2 = await _batch(lt_client, B, [_item("changed in B", external_id="same-key")])
    assert b2[0]["id"] == b[1]["id"]
    assert {r["id"]: r for r in await _all(lt_client, A)} == {r["id"]: r for r in a}
    assert {r["content"] for r in await _all(lt_client, B)} == {
        "shared words here",
        "changed in B",
    }
    for record in a:
        r = await lt_client.get(f"/v1/memory/semantic/{record['id']}", headers=B)
        assert r.status_code == 404


async def test_search_with_a_precomputed_query_vector(lt_client: httpx.AsyncClient) -> None:
    answered = await _batch(
        lt_client, A, [_item("parcels ship from Leeds"), _item("invoices are sent monthly")]
    )
    # The vector decides (the text would rank the invoice first): nothing is embedded.
    body = {
        "query": "invoices",
        "embedding": deterministic_embedding("parcels ship from Leeds", DIMS),
        "mode": "vector",
        "limit": 2,
    }
    r = await lt_client.post("/v1/memory/semantic/search", json=body, headers=A)
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    assert [h["record"]["id"] for h in hits] == [answered[0]["id"], answered[1]["id"]]
    assert hits[0]["score"] == pytest.approx(1.0, abs=1e-5)
    assert hits[0]["record"] == answered[0]
    r = await lt_client.post(
        "/v1/memory/semantic/search", json={**body, "embedding": [0.5, 0.5]}, headers=A
    )
    assert r.status_code == 422 and "dimensions" in r.text


@pytest.mark.parametrize("mode", ["all words", "any word"])
async def test_keyword_ranking_ranks_a_bounded_number_of_matches(
    lt_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A query of common words matches nearly every record; only KEYWORD_CANDIDATES of
    the matches are ranked by relevance (ranking them all took seconds at 100,000)."""
    await _batch(lt_client, A, [_item(f"common word record {i} unique{i}") for i in range(12)])
    # "all words": every record holds both words; "any word": none holds all three.
    query = "common record" if mode == "all words" else "common record absentword"
    body = {"query": query, "limit": 12}
    r = await lt_client.post("/v1/memory/semantic/search", json=body, headers=A)
    ranked = [h for h in r.json()["hits"] if h["keyword_rank"] is not None]
    assert len(ranked) == 12
    monkeypatch.setattr(LongTermStore, "KEYWORD_CANDIDATES", 5)
    r = await lt_client.post("/v1/memory/semantic/search", json=body, headers=A)
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    ranked = [h for h in hits if h["keyword_rank"] is not None]
    assert len(ranked) == 5
    assert sorted(h["keyword_rank"] for h in ranked) == [1, 2, 3, 4, 5]
    # The vector half still finds every record.
    assert len(hits) == 12
