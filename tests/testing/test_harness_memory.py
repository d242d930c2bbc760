"""PlatformHarness's memory service embeds with the DeterministicEmbedder of soorma.testing,
so a test can predict what long-term memory answers."""

from __future__ import annotations

import pytest

from soorma.testing import DeterministicEmbedder, PlatformHarness


@pytest.mark.asyncio
async def test_harness_memory_uses_the_deterministic_embedder_a_test_can_reproduce():
    async with PlatformHarness(user_id="ada") as platform:
        memory = platform.context.memory
        info = await memory.embedding_info()
        embedder = DeterministicEmbedder(dimensions=info.dimensions)
        assert info.model == embedder.model
        assert info.provider  # named, e.g. for a 503

        stored = await memory.knowledge.add("Cats sleep most of the day.")
        found = await memory.knowledge.search("do cats sleep?", mode="vector", limit=1)

    assert found.hits[0].record.id == stored.id
    expected = embedder.similarity("Cats sleep most of the day.", "do cats sleep?")
    assert found.hits[0].vector_score == pytest.approx(expected, abs=1e-4)
    assert found.embedding_model == embedder.model


def test_deterministic_embedder_is_stable_unit_length_and_word_based():
    embedder = DeterministicEmbedder(dimensions=64)
    a = embedder.embed("refund for order 1042")
    assert a == DeterministicEmbedder(dimensions=64).embed("refund for order 1042")
    assert len(a) == 64 and sum(x * x for x in a) == pytest.approx(1.0)
    assert embedder.similarity("refund order", "order refund") == pytest.approx(1.0)
    assert embedder.similarity("refund order", "refund parcel") > 0
    assert embedder.embed_many(["x", "y"]) == [embedder.embed("x"), embedder.embed("y")]
    assert embedder.model == "deterministic/64"
