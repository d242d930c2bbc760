"""context.memory.knowledge against the real memory service (deterministic embedder)."""

from __future__ import annotations

import pytest

from soorma.testing import DeterministicEmbedder
from soorma_common.errors import SoormaError, ValidationFailed
from soorma_common.knowledge import SemanticHit, SemanticMemoryRecord, SemanticSearchResult

pytestmark = pytest.mark.asyncio

FACTS = [
    "Refunds are paid back within 5 business days.",
    "The warehouse in Berlin ships orders on weekdays.",
    "Payment error 402 means the card was declined by the bank.",
]


async def test_knowledge_is_stored_found_by_meaning_and_deleted(memory):
    stored = [await memory.knowledge.add(f, source="faq.md", tags=["faq"]) for f in FACTS]
    assert all(isinstance(r, SemanticMemoryRecord) for r in stored)
    assert stored[0].user_id == "user-1" and stored[0].public is False

    found = await memory.knowledge.search("how many days until refunds are paid?", limit=2)

    assert isinstance(found, SemanticSearchResult) and found.mode == "hybrid"
    assert all(isinstance(h, SemanticHit) for h in found.hits)
    assert found.hits[0].record.id == stored[0].id
    assert len(found.hits) <= 2
    assert [h.score for h in found.hits] == sorted((h.score for h in found.hits), reverse=True)

    assert (await memory.knowledge.get(stored[1].id)).content == FACTS[1]
    assert {r.id for r in await memory.knowledge.list(source="faq.md")} == {r.id for r in stored}
    assert await memory.knowledge.delete(stored[1].id) is True
    assert await memory.knowledge.get(stored[1].id) is None
    assert await memory.knowledge.delete(stored[1].id) is False


async def test_external_id_upserts_and_equal_content_is_stored_once(memory):
    first = await memory.knowledge.add("Opening hours: 9 to 5.", external_id="hours")
    second = await memory.knowledge.add("Opening hours: 8 to 6.", external_id="hours")
    assert second.id == first.id and second.content == "Opening hours: 8 to 6."
    assert [r.content for r in await memory.knowledge.list(external_id="hours")] == [
        "Opening hours: 8 to 6."
    ]

    a = await memory.knowledge.add("Support answers in English and German.")
    b = await memory.knowledge.add("Support answers in English and German.")
    assert a.id == b.id
    assert await memory.knowledge.delete_external("hours") is True
    assert await memory.knowledge.get(first.id) is None
    assert await memory.knowledge.delete_external("hours") is False


async def test_add_many_stores_in_order(memory):
    records = await memory.knowledge.add_many(
        ["first fact", {"content": "second fact", "tags": ["x"]}, "third fact"]
    )
    assert [r.content for r in records] == ["first fact", "second fact", "third fact"]
    assert records[1].tags == ["x"]
    assert await memory.knowledge.add_many([]) == []


async def test_add_many_splits_what_one_request_cannot_carry(memory):
    # 1,500 items (the service takes 1,000 per request) of ~400 bytes (600 KB of JSON,
    # over the service's 256 KiB body limit): sent as several requests, order kept.
    texts = [f"fact number {i}: " + "lorem ipsum " * 30 for i in range(1500)]
    records = await memory.knowledge.add_many(texts)
    assert [r.content for r in records] == texts
    assert len(await memory.knowledge.list(limit=1000)) == 1000


async def test_a_document_is_chunked_under_its_id_and_replaced_as_a_whole(memory):
    text = " ".join(f"Paragraph {i} talks about shipping zone {i}." for i in range(40))
    chunks = await memory.knowledge.add_document(
        "shipping-guide", text, chunk_size=200, chunk_overlap=20, source="guide.md"
    )
    assert len(chunks) > 3
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert {c.parent_external_id for c in chunks} == {"shipping-guide"}
    listed = await memory.knowledge.list(parent_external_id="shipping-guide")
    assert sorted(c.id for c in listed) == sorted(c.id for c in chunks)

    shorter = await memory.knowledge.add_document("shipping-guide", "Only one short chunk now.")
    assert len(shorter) == 1
    assert len(await memory.knowledge.list(parent_external_id="shipping-guide")) == 1
    assert await memory.knowledge.delete_external("shipping-guide") is True
    assert await memory.knowledge.list(parent_external_id="shipping-guide") == []


async def test_filters_on_tags_source_and_metadata(memory):
    await memory.knowledge.add("Shipping to Norway takes a week.", tags=["shipping"])
    await memory.knowledge.add(
        "Shipping to Spain takes three days.", source="eu.md", metadata={"region": "south"}
    )
    await memory.knowledge.add(
        "Shipping to Italy takes four days.", source="eu.md", metadata={"region": "south"}
    )

    by_tag = await memory.knowledge.search("shipping", tags=["shipping"])
    by_source = await memory.knowledge.search("shipping", source="eu.md")
    by_meta = await memory.knowledge.search("shipping", metadata={"region": "south"})

    assert [h.record.content for h in by_tag.hits] == ["Shipping to Norway takes a week."]
    assert len(by_source.hits) == 2 and all(h.record.source == "eu.md" for h in by_source.hits)
    assert {h.record.content for h in by_meta.hits} == {h.record.content for h in by_source.hits}


async def test_hybrid_finds_an_exact_code_and_vector_mode_is_reported(memory):
    for i in range(20):
        await memory.knowledge.add(f"Payment problem number {i}: the card needs checking.")
    code = await memory.knowledge.add("Gateway answered E-77341 for the declined payment.")

    hybrid = await memory.knowledge.search("E-77341", limit=3)
    vector = await memory.knowledge.search("E-77341", limit=3, mode="vector")

    assert hybrid.hits[0].record.id == code.id
    assert hybrid.hits[0].keyword_rank == 1
    assert vector.mode == "vector" and all(h.keyword_rank is None for h in vector.hits)


async def test_min_score_leaves_weak_hits_out(memory):
    await memory.knowledge.add("Cats sleep most of the day.")
    strong = await memory.knowledge.search("cats sleep", mode="vector", min_score=0.5)
    none = await memory.knowledge.search("quantum chromodynamics", mode="vector", min_score=0.5)
    assert len(strong.hits) == 1 and none.hits == []


async def test_a_precomputed_embedding_is_stored_as_given(memory):
    info = await memory.embedding_info()
    embedder = DeterministicEmbedder(dimensions=info.dimensions)
    text = "Precomputed vectors skip the embedder."
    record = await memory.knowledge.add(text, embedding=embedder.embed(text))
    found = await memory.knowledge.search(text, mode="vector", limit=1)
    assert found.hits[0].record.id == record.id
    assert found.hits[0].vector_score == pytest.approx(1.0, abs=1e-3)


async def test_search_with_a_precomputed_query_vector(memory):
    info = await memory.embedding_info()
    embedder = DeterministicEmbedder(dimensions=info.dimensions)
    stored = [await memory.knowledge.add(fact) for fact in FACTS]
    # The vector is the warehouse fact's; the words are the refund fact's.
    found = await memory.knowledge.search(
        "refunds paid back", embedding=embedder.embed(FACTS[1]), mode="vector", limit=1
    )
    assert [hit.record.id for hit in found.hits] == [stored[1].id]
    assert found.hits[0].vector_score == pytest.approx(1.0, abs=1e-3)


async def test_private_public_and_tenant_visibility(make_memory):
    alice, bob = make_memory("tenant-a", "alice"), make_memory("tenant-a", "bob")
    mallory = make_memory("tenant-b", "alice")
    private = await alice.knowledge.add("Alice's locker code is 4711.")
    shared = await alice.knowledge.add("The team offsite is in Lisbon.", public=True)

    assert await bob.knowledge.get(private.id) is None
    assert (await bob.knowledge.get(shared.id)).public is True
    bob_hits = await bob.knowledge.search("locker code offsite Lisbon")
    assert [h.record.id for h in bob_hits.hits] == [shared.id]
    own_only = await bob.knowledge.search("offsite Lisbon", include_public=False)
    assert own_only.hits == []
    assert await bob.knowledge.delete(shared.id) is False  # readable, not Bob's to delete

    assert await mallory.knowledge.get(shared.id) is None
    assert (await mallory.knowledge.search("locker code offsite Lisbon")).hits == []
    assert await mallory.knowledge.list() == []
    assert await mallory.knowledge.delete(private.id) is False
    assert (await alice.knowledge.get(private.id)) is not None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.knowledge.add("   "), "content"),
        (lambda m: m.knowledge.add("x" * 40_000), "content"),
        (lambda m: m.knowledge.add("nul \x00 inside"), "NUL"),
        (lambda m: m.knowledge.search("q", limit=51), "limit"),
        (lambda m: m.knowledge.search("q" * 10_000), "query"),
        (lambda m: m.knowledge.search("q", metadata={"bad key!": 1}), "metadata"),
        (lambda m: m.knowledge.add_document("d#1", "text"), "#"),
    ],
)
async def test_bad_input_is_a_validation_error_before_any_request(memory, call, message):
    with pytest.raises(ValidationFailed, match=message):
        await call(memory)


async def test_the_service_refuses_what_the_client_cannot_check(memory):
    # A vector of the wrong size: the service names the model (a 4xx, nothing stored).
    with pytest.raises(SoormaError) as caught:
        await memory.knowledge.add("wrong size", embedding=[0.5, 0.5, 0.5])
    assert 400 <= caught.value.status_code < 500
    assert (await memory.embedding_info()).model in caught.value.message
    assert await memory.knowledge.list() == []
    # An id with a NUL byte is answered as missing or refused, never a 500.
    try:
        assert await memory.knowledge.get("id\x00nul") is None
    except ValidationFailed:
        pass
