"""The semantic-search fast path answers exactly like the FastAPI route it stands in for.

Two apps share one database (SQLite and PostgreSQL with pgvector): one with the fast path,
one with its switch off. The records are written once; every search is then sent to both
and the status, content type and body bytes must be identical (same records, so same ids
and timestamps). Bad input must reach the route (the fast path hands it over) and get
the route's own error.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_service import create_app
from memory_service.search_fastpath import SemanticSearchFastPath
from memory_service.settings import Settings
from testsupport.services import in_process, memory_settings

pytestmark = pytest.mark.asyncio

SEARCH = "/v1/memory/semantic/search"
A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}
BOB = {"X-Tenant-ID": "tenant-a", "X-User-ID": "bob"}


class _CountingFastPath(SemanticSearchFastPath):
    """The fast path, noting what it answered itself and what it handed to FastAPI."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.answered = 0
        self.handed_over = 0

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, *, fallback: ASGIApp
    ) -> None:
        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            self.handed_over += 1
            await fallback(scope, receive, send)

        before = self.handed_over
        await super().__call__(scope, receive, send, fallback=counted)
        self.answered += self.handed_over == before


Pair = tuple[httpx.AsyncClient, httpx.AsyncClient, _CountingFastPath]


@asynccontextmanager
async def _fast_and_routed(lt_db_url: str, tmp_path: Any) -> AsyncIterator[Pair]:
    settings: Settings = memory_settings(
        lt_db_url, tmp_path, embedding_model="deterministic/256", max_payload_bytes=65536
    )
    spy = _CountingFastPath(settings=settings, max_body_bytes=65536 * 4)
    routed = settings.model_copy(update={"semantic_search_fast_path": False})
    async with AsyncExitStack() as stack:
        fast = await stack.enter_async_context(
            in_process(create_app(settings, search_fast_path=spy), base_url="http://memory")
        )
        slow = await stack.enter_async_context(
            in_process(create_app(routed), base_url="http://memory")
        )
        yield fast, slow, spy


async def _same(pair: Pair, body: bytes | Any, **kwargs: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    kwargs.setdefault("headers", {**A, "content-type": "application/json"})
    answers = [await client.post(SEARCH, content=content, **kwargs) for client in pair[:2]]
    fast, routed = answers
    assert fast.status_code == routed.status_code, (body, fast.text, routed.text)
    assert fast.headers["content-type"] == routed.headers["content-type"]
    assert fast.content == routed.content, body
    return fast


def _vector(seed: int) -> list[float]:
    raw = [math.sin(seed * 7.1 + i * 0.37) for i in range(256)]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


async def _seed(client: httpx.AsyncClient) -> None:
    items = [
        {
            "content": f"shipping note {i} about {'spain' if i % 2 else 'canada'} orders",
            "tags": ["shipping", "eu"] if i % 3 == 0 else ["shipping"],
            "source": "faq" if i % 2 else "wiki",
            "metadata": {"lang": "en" if i % 4 else "ja", "n": i, "nested": {"ok": True}},
            "public": i % 5 == 0,
            "embedding": _vector(i),
        }
        for i in range(40)
    ]
    # Every field set, and values whose JSON two serializers could write differently
    # (escapes, non-ASCII, small and long floats, nulls): the bytes must still match.
    items.append(
        {
            "content": 'Zoë\'s "quoted" note \u2713 with a tab\tand a bell \u0007',
            "external_id": "doc-7#0",
            "tags": ["ünïcode", "a\\b"],
            "source": "wiki",
            "metadata": {
                "price": 12.5,
                "tiny": 1e-7,
                "third": 1 / 3,
                "big": 2**62,
                "list": [1, 2.25, None, False, "\u00e9\u4e2d"],
                "esc": "line\nbreak \u001f </script>",
            },
            "embedding": _vector(3),
        }
    )
    r = await client.post("/v1/memory/semantic/batch", json={"items": items}, headers=A)
    assert r.status_code == 200, r.text
    # Chunks of a document: parent external id and chunk index set.
    r = await client.post(
        "/v1/memory/semantic/documents",
        json={
            "external_id": "manual",
            "content": "shipping manual, chapter one. " * 20,
            "chunk_size": 200,
            "chunk_overlap": 20,
        },
        headers=A,
    )
    assert r.status_code in (200, 201), r.text
    r = await client.post(
        "/v1/memory/semantic",
        json={"content": "bob's public shipping note", "public": True, "embedding": _vector(99)},
        headers=BOB,
    )
    assert r.status_code == 201, r.text


async def test_searches_answer_byte_for_byte_like_the_route(lt_db_url: str, tmp_path: Any) -> None:
    async with _fast_and_routed(lt_db_url, tmp_path) as pair:
        await _seed(pair[1])
        good: list[dict[str, Any]] = [
            {"query": "shipping", "mode": "vector", "embedding": _vector(3)},
            {"query": "shipping", "mode": "vector", "embedding": _vector(7), "limit": 3},
            {"query": "shipping to spain", "mode": "vector"},  # the service embeds
            {"query": "shipping manual, chapter one.", "mode": "vector"},  # the chunks
            {"query": "shipping spain", "mode": "hybrid"},
            {"query": "shipping spain"},  # hybrid by default
            {"query": "canada", "mode": "hybrid", "embedding": _vector(2), "limit": 5},
            {"query": "x", "mode": "vector", "embedding": _vector(5), "tags": ["eu"]},
            {"query": "x", "mode": "vector", "embedding": _vector(5), "source": "wiki"},
            {"query": "x", "mode": "vector", "embedding": _vector(5), "metadata": {"lang": "ja"}},
            {"query": "x", "mode": "vector", "embedding": _vector(5), "metadata": {"n": 4}},
            {"query": "x", "mode": "vector", "embedding": _vector(5), "min_score": 0.5},
            {"query": "x", "mode": "vector", "embedding": _vector(5), "include_public": False},
            # camelCase aliases are accepted on input
            {"query": "x", "mode": "vector", "embedding": _vector(6), "includePublic": False},
            {"query": "x", "mode": "vector", "embedding": _vector(6), "minScore": 0.1},
            {"query": "nothing matches", "mode": "vector", "embedding": _vector(1), "tags": ["no"]},
        ]
        for body in good:
            r = await _same(pair, body)
            assert r.status_code == 200
        assert pair[2].answered == len(good) and pair[2].handed_over == 0
        # Bob sees his own and the public records, not Alice's private ones.
        r = await _same(
            pair,
            {"query": "x", "mode": "vector", "embedding": _vector(99)},
            headers={**BOB, "content-type": "application/json"},
        )
        hits = r.json()["hits"]
        assert hits and all(h["record"]["public"] or h["record"]["user_id"] == "bob" for h in hits)
        # Vector mode's first hit for a stored vector is that record, score ~1.
        r = await _same(pair, {"query": "q", "mode": "vector", "embedding": _vector(10)})
        first = r.json()["hits"][0]
        assert first["record"]["metadata"]["n"] == 10 and first["score"] > 0.999
        # The chunks and the record with every kind of value were among the answers.
        r = await _same(pair, {"query": "shipping manual, chapter one.", "mode": "vector"})
        assert any(h["record"]["parent_external_id"] == "manual" for h in r.json()["hits"])
        r = await _same(pair, {"query": "x", "mode": "vector", "embedding": _vector(3)})
        assert "doc-7#0" in [h["record"]["external_id"] for h in r.json()["hits"]]


async def test_bad_input_gets_the_routes_errors(lt_db_url: str, tmp_path: Any) -> None:
    async with _fast_and_routed(lt_db_url, tmp_path) as pair:
        await _seed(pair[1])
        spy = pair[2]
        handed: list[tuple[bytes | Any, dict[str, str] | None]] = [
            (b"{not json", None),
            ({"mode": "vector"}, None),  # no query
            ({"query": "x", "unknown": 1}, None),
            ({"query": "x", "limit": "10"}, None),  # strict: no coercion
            ({"query": "x", "limit": 0}, None),
            ({"query": "x", "mode": "nearest"}, None),
            ({"query": "x\u0000y"}, None),
            ({"query": "x", "embedding": [1.0, "a"]}, None),
            ({"query": "x", "metadata": {"bad key!": 1}}, None),
            (b'{"query": "x", "embedding": [NaN]}', None),  # the standard parser's NaN
            # orjson reads 2**64 as a float; read as the route reads it, it is refused.
            (b'{"query": "x", "metadata": {"n": 18446744073709551616}}', None),
            (b"[1, 2]", None),
            ({"query": "x"}, {**A, "content-type": "text/plain"}),
            ({"query": "x"}, {"X-Tenant-ID": "bad tenant!", "content-type": "application/json"}),
        ]
        for body, headers in handed:
            before = spy.handed_over
            r = await _same(pair, body, **({"headers": headers} if headers else {}))
            assert 400 <= r.status_code < 500, (body, r.status_code)
            assert "error" in r.json()
            assert spy.handed_over == before + 1, body
        # Well-formed, refused by the search itself (a vector of the wrong size): the fast
        # path renders the domain error as the app's handler does.
        before = spy.answered
        r = await _same(pair, {"query": "x", "mode": "vector", "embedding": [0.5] * 3})
        assert r.status_code == 422 and spy.answered == before + 1


async def test_the_switch_alone_turns_it_off(lt_db_url: str, tmp_path: Any) -> None:
    settings = memory_settings(lt_db_url, tmp_path, semantic_search_fast_path=False)
    off = create_app(settings.model_copy(update={"plan_context_fast_path": False}))
    assert off.fast_path is None
    on = create_app(settings.model_copy(update={"semantic_search_fast_path": True}))
    assert on.fast_path is not None and on.fast_path.handles(
        {"type": "http", "method": "POST", "path": SEARCH}
    )
