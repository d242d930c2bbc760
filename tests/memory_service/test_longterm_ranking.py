"""Pure parts of long-term memory: reciprocal-rank fusion, and a provider whose vectors
no longer match the stored model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from memory_service.longterm.service import LongTermMemory, fuse
from memory_service.longterm.store import LongTermStore, Ranked
from memory_service.sql import open_sql_store
from soorma_common.errors import EmbeddingMismatch
from soorma_common.knowledge import SemanticMemoryCreate, SemanticSearch


def test_fusion_adds_reciprocal_ranks_and_orders_best_first() -> None:
    vector = [Ranked("a", 0.9), Ranked("b", 0.8), Ranked("c", 0.1)]
    keyword = [Ranked("c", 5.0), Ranked("d", 1.0)]
    fused = fuse(vector, keyword)
    assert [f[0] for f in fused] == ["c", "a", "b", "d"]
    by_id = {f[0]: f for f in fused}
    assert by_id["c"] == ("c", pytest.approx(1 / 63 + 1 / 61), 3, 1)
    assert by_id["a"] == ("a", pytest.approx(1 / 61), 1, None)
    assert by_id["d"] == ("d", pytest.approx(1 / 62), None, 2)


def test_fusion_of_nothing_is_nothing() -> None:
    assert fuse([], []) == []


class _ShrunkEmbedder:
    """Says 8 dimensions, answers 4: a provider reconfigured behind the service's back."""

    model = "shrinking-model"
    provider = "test"

    async def dimensions(self) -> int:
        return 8

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]

    async def close(self) -> None:
        pass


@pytest.mark.asyncio
async def test_vectors_of_another_size_are_a_409_naming_model_and_reembed(
    tmp_path: Any,
) -> None:
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path}/m.db")
    try:
        memory = LongTermMemory(
            await LongTermStore.open(store.engine), _ShrunkEmbedder(), reembed_batch=10
        )
        for call in (
            memory.add_semantic("t", "u", [SemanticMemoryCreate(content="x")]),
            memory.search_semantic("t", "u", SemanticSearch(query="x")),
        ):
            with pytest.raises(EmbeddingMismatch) as caught:
                await call
            assert "shrinking-model" in caught.value.message
            assert "soorma memory reembed" in caught.value.message
    finally:
        await store.close()
