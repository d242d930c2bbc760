"""POST /v1/memory/embeddings: texts to vectors with the active model, nothing stored."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


async def test_embeds_texts_in_order_with_the_active_model(make_lt_client) -> None:
    async with make_lt_client(embedding_model="deterministic/64") as client:
        r = await client.post(
            "/v1/memory/embeddings",
            json={"texts": ["green tea", "tea green", "cold weather"]},
            headers=A,
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["model"] == "deterministic/64" and body["dimensions"] == 64
        same, other = body["vectors"][1], body["vectors"][2]
        assert len(body["vectors"]) == 3 and len(same) == 64
        assert cosine(body["vectors"][0], same) > 0.99 > cosine(body["vectors"][0], other)
        # Nothing was stored.
        assert (await client.get("/v1/memory/semantic", headers=A)).json() == []


async def test_the_default_model_captures_meaning_beyond_shared_words(make_client) -> None:
    async with make_client() as client:
        r = await client.post(
            "/v1/memory/embeddings",
            json={
                "texts": [
                    "will it rain tomorrow, do I need an umbrella?",
                    "current weather forecast for a city",
                    "translate text between languages",
                ]
            },
            headers=A,
        )
    assert r.status_code == 200, r.text
    assert r.json()["model"].startswith("wordllama/")
    rain, weather, translate = r.json()["vectors"]
    assert cosine(rain, weather) > cosine(rain, translate) + 0.2


async def test_bad_requests_are_refused(make_client) -> None:
    async with make_client(embedding_model="deterministic/8") as client:
        empty = await client.post("/v1/memory/embeddings", json={"texts": []}, headers=A)
        many = await client.post("/v1/memory/embeddings", json={"texts": ["x"] * 257}, headers=A)
        long = await client.post("/v1/memory/embeddings", json={"texts": ["x" * 8001]}, headers=A)
        nul = await client.post("/v1/memory/embeddings", json={"texts": ["a\u0000"]}, headers=A)
        blank = await client.post("/v1/memory/embeddings", json={"texts": [""]}, headers=A)
    assert [r.status_code for r in (empty, many, long, nul, blank)] == [422] * 5
