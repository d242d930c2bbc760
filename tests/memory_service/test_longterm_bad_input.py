"""Bad input to long-term memory gets a clear 4xx, never a 500, and stores nothing.

One service per backend for the module; each test is its own tenant."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.asyncio(loop_scope="module")

BAD_BODIES = [
    ("/v1/memory/semantic", {"content": ""}, "content"),
    ("/v1/memory/semantic", {"content": "   "}, "content"),
    ("/v1/memory/semantic", {"content": "x" * 32_001}, "content"),
    ("/v1/memory/semantic", {"content": "a\x00b"}, "NUL"),
    ("/v1/memory/semantic", {"content": "ok", "external_id": "a\x00"}, "NUL"),
    ("/v1/memory/semantic", {"content": "ok", "metadata": {"k": "v\x00"}}, "NUL"),
    ("/v1/memory/semantic", {"content": "ok", "tags": ["t\x00"]}, "NUL"),
    # Found by the OpenAPI fuzzer: an integer past 64 bits in metadata was a 500.
    ("/v1/memory/semantic", {"content": "ok", "metadata": {"n": 2**64}}, "metadata.n: integer"),
    ("/v1/memory/semantic", {"content": "ok", "metadata": {"a": [1, -(2**63) - 1]}}, "64-bit"),
    ("/v1/memory/semantic", {"content": "ok", "colour": "red"}, "colour"),
    ("/v1/memory/semantic", {"content": "ok", "embedding": [0, 0]}, "embedding"),
    ("/v1/memory/semantic/batch", {"items": []}, "items"),
    ("/v1/memory/semantic/batch", {"items": [{"content": "x"}] * 1001}, "items"),
    ("/v1/memory/semantic/documents", {"external_id": "d#1", "content": "x"}, "#"),
    (
        "/v1/memory/semantic/documents",
        {"external_id": "d", "content": "x", "chunk_size": 100, "chunk_overlap": 100},
        "chunk_overlap",
    ),
    ("/v1/memory/semantic/search", {"query": "q" * 10_000}, "query"),
    ("/v1/memory/semantic/search", {"query": ""}, "query"),
    ("/v1/memory/semantic/search", {"query": "q", "limit": 0}, "limit"),
    ("/v1/memory/semantic/search", {"query": "q", "limit": 51}, "limit"),
    ("/v1/memory/semantic/search", {"query": "q", "mode": "magic"}, "mode"),
    ("/v1/memory/semantic/search", {"query": "q", "owner": "bob"}, "owner"),
    ("/v1/memory/semantic/search", {"query": "q", "metadata": {"a b": 1}}, "metadata"),
    ("/v1/memory/semantic/search", {"query": "q", "metadata": {"a": [1]}}, "metadata"),
    ("/v1/memory/semantic/search", {"query": "q\x00"}, "NUL"),
    ("/v1/memory/episodes", {"agent_id": "a", "role": "robot", "content": "x"}, "role"),
    ("/v1/memory/episodes", {"agent_id": "", "role": "user", "content": "x"}, "agent_id"),
    ("/v1/memory/episodes", {"agent_id": "a\x00", "role": "user", "content": "x"}, "NUL"),
    (
        "/v1/memory/episodes",
        {"agent_id": "a", "role": "user", "content": "x", "metadata": {"n": 2**70}},
        "metadata.n: integer exceeds 64-bit range",
    ),
    (
        "/v1/memory/episodes/search",
        {"agent_id": "a", "query": "q", "since": "2026-02-01T00:00:00Z", "until": "2026-01-01"},
        "since",
    ),
    ("/v1/memory/episodes/search", {"agent_id": "a", "query": "q", "limit": 500}, "limit"),
    ("/v1/memory/procedures", {"kind": "spell", "content": "x", "situation": "y"}, "kind"),
    ("/v1/memory/procedures", {"kind": "rule", "content": "x"}, "situation"),
    (
        "/v1/memory/procedures",
        {"kind": "rule", "content": "x", "situation": "y", "metadata": {"n": 2**64}},
        "64-bit",
    ),
    ("/v1/memory/procedures/relevant", {"query": "q", "kinds": ["spell"]}, "kinds"),
]


@pytest.mark.parametrize(("path", "body", "mentions"), BAD_BODIES)
async def test_bad_bodies_are_422_with_a_message(
    shared_lt_client: httpx.AsyncClient,
    own_tenant: dict[str, str],
    path: str,
    body: dict,
    mentions: str,
) -> None:
    r = await shared_lt_client.post(path, json=body, headers=own_tenant)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "validation_error"
    assert mentions in error["message"] + str(error["details"])


@pytest.mark.parametrize(
    "path",
    [
        "/v1/memory/episodes/recent?agent_id=a&limit=0",
        "/v1/memory/episodes/recent?agent_id=a&limit=201",
        "/v1/memory/episodes/recent",
        "/v1/memory/episodes/recent?agent_id=a%00",
        "/v1/memory/semantic?limit=0",
        "/v1/memory/semantic?external_id=a%00",
        "/v1/memory/semantic/a%00b",
        "/v1/memory/procedures?kind=spell",
        "/v1/memory/procedures/a%00b",
    ],
)
async def test_bad_queries_and_ids_are_422(
    shared_lt_client: httpx.AsyncClient, own_tenant: dict[str, str], path: str
) -> None:
    r = await shared_lt_client.get(path, headers=own_tenant)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "validation_error"


async def test_nothing_was_stored_and_the_service_still_answers(
    shared_lt_client: httpx.AsyncClient, own_tenant: dict[str, str]
) -> None:
    client, headers = shared_lt_client, own_tenant
    for path, body, _ in BAD_BODIES[:10]:
        await client.post(path, json=body, headers=headers)
    assert (await client.get("/v1/memory/semantic", headers=headers)).json() == []
    r = await client.post("/v1/memory/semantic", json={"content": "fine"}, headers=headers)
    assert r.status_code == 201
