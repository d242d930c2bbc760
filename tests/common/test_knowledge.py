"""The long-term memory DTOs refuse bad input, and the pure helpers behave."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from soorma_common.knowledge import (
    EpisodeSearch,
    SemanticDocumentCreate,
    SemanticMemoryCreate,
    SemanticSearch,
    chunk_text,
    deterministic_embedding,
)


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_deterministic_embedding_is_unit_and_stable() -> None:
    v = deterministic_embedding("Refunds over 100 EUR need approval", 64)
    assert v == deterministic_embedding("refunds over 100 eur need approval", 64)
    assert math.isclose(sum(x * x for x in v), 1.0)


def test_deterministic_embedding_texts_sharing_words_are_closer() -> None:
    q = deterministic_embedding("refund policy", 256)
    near = deterministic_embedding("our refund policy is generous", 256)
    far = deterministic_embedding("the weather in lisbon", 256)
    assert _cosine(q, near) > _cosine(q, far)


def test_chunk_text_covers_text_with_overlap_and_bounded_size() -> None:
    text = " ".join(f"word{i}" for i in range(500))
    chunks = chunk_text(text, 200, 40)
    assert all(len(c) <= 200 for c in chunks)
    assert chunks[0].startswith("word0 ")
    assert chunks[-1].endswith("word499")
    # Consecutive chunks share some words (the overlap).
    assert set(chunks[0].split()[-3:]) & set(chunks[1].split())


def test_chunk_text_short_and_empty() -> None:
    assert chunk_text("hello", 100, 10) == ["hello"]
    assert chunk_text("   ", 100, 10) == []
    with pytest.raises(ValueError):
        chunk_text("x", 10, 10)


@pytest.mark.parametrize(
    "body",
    [
        {"content": ""},
        {"content": "   "},
        {"content": "x" * 32_001},
        {"content": "a\x00b"},
        {"content": "ok", "metadata": {"k": "a\x00"}},
        {"content": "ok", "unknown": 1},
        {"content": "ok", "embedding": [0.0, 0.0]},
        {"content": "ok", "tags": [1]},
    ],
)
def test_semantic_create_refuses_bad_input(body: dict) -> None:
    with pytest.raises(ValidationError):
        SemanticMemoryCreate.model_validate(body)


def test_search_refuses_long_query_and_bad_limit_and_bad_filter_key() -> None:
    with pytest.raises(ValidationError):
        SemanticSearch.model_validate({"query": "x" * 10_000})
    with pytest.raises(ValidationError):
        SemanticSearch.model_validate({"query": "x", "limit": 51})
    with pytest.raises(ValidationError):
        SemanticSearch.model_validate({"query": "x", "metadata": {"a'b": 1}})
    assert SemanticSearch.model_validate({"query": "x", "minScore": 0.1}).min_score == 0.1


def test_document_overlap_must_be_below_size() -> None:
    with pytest.raises(ValidationError):
        SemanticDocumentCreate.model_validate(
            {"external_id": "d", "content": "x", "chunk_size": 100, "chunk_overlap": 100}
        )


def test_episode_search_accepts_iso_times() -> None:
    s = EpisodeSearch.model_validate(
        {"agent_id": "a", "query": "q", "since": "2026-01-01T00:00:00Z"}
    )
    assert s.since is not None and s.since.year == 2026
