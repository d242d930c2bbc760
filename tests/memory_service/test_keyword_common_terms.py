"""Hybrid search's keyword half leaves out words common in the search's scope
(``memory_service.longterm.keywords``): exact codes and order ids are still found among
many records sharing common words, records sharing only common words get no keyword
rank, and on PostgreSQL the keyword query no longer reads every record holding a common
word (counted in its plan, not timed). Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from memory_service.longterm.store import LongTermStore
from soorma_common.knowledge import deterministic_embedding

pytestmark = pytest.mark.asyncio

A = {"X-Tenant-ID": "tenant-a", "X-User-ID": "alice"}
DIMS = 256
# The sample that tells common words, small here so a test needs few records.
SAMPLE = 40
NOISE = 80
SERVICES = ("login", "search", "billing", "upload", "export", "mail", "report", "sync")

PAYMENT = "Payment declined: error 402 from the card processor"
ORDER = "Order 7KX93QF shipped late: error in the warehouse service"


def _noise(i: int) -> str:
    # "error", "in", "the", "service" are in every record; "retry" in every other one.
    tail = "retry later" if i % 2 else "see the log"
    return f"error in the {SERVICES[i % len(SERVICES)]} service number{i}, {tail}"


async def _seed(client: httpx.AsyncClient) -> dict[str, str]:
    texts = [_noise(i) for i in range(NOISE)] + [PAYMENT, ORDER]
    items = [{"content": t, "embedding": deterministic_embedding(t, DIMS)} for t in texts]
    r = await client.post("/v1/memory/semantic/batch", json={"items": items}, headers=A)
    assert r.status_code == 200, r.text
    return {record["content"]: record["id"] for record in r.json()}


async def _hits(client: httpx.AsyncClient, query: str, limit: int = 10) -> list[dict[str, Any]]:
    r = await client.post(
        "/v1/memory/semantic/search", json={"query": query, "limit": limit}, headers=A
    )
    assert r.status_code == 200, r.text
    hits: list[dict[str, Any]] = r.json()["hits"]
    return hits


def _keyword_ranked(hits: list[dict[str, Any]]) -> list[str]:
    ranked = sorted((h for h in hits if h["keyword_rank"] is not None), key=_rank)
    return [h["record"]["content"] for h in ranked]


def _rank(hit: dict[str, Any]) -> int:
    rank: int = hit["keyword_rank"]
    return rank


@pytest.fixture
def small_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LongTermStore, "KEYWORD_SAMPLE", SAMPLE)


@pytest.mark.usefixtures("small_sample")
async def test_exact_codes_are_found_among_many_records_sharing_common_words(
    lt_client: httpx.AsyncClient,
) -> None:
    ids = await _seed(lt_client)
    hits = await _hits(lt_client, "error 402", limit=3)
    assert hits[0]["record"]["id"] == ids[PAYMENT]
    assert hits[0]["keyword_rank"] == 1
    # An order id (as typed: case does not matter) among words every record holds.
    hits = await _hits(lt_client, "what about order 7kx93qf in the service")
    assert hits[0]["record"]["id"] == ids[ORDER]
    assert _keyword_ranked(hits) == [ORDER]


@pytest.mark.usefixtures("small_sample")
async def test_records_sharing_only_common_words_get_no_keyword_rank(
    lt_client: httpx.AsyncClient,
) -> None:
    """Ranking every record that holds "error" is what made hybrid search slow at
    100,000 records; such records now get no keyword rank (the vector half still
    finds them)."""
    await _seed(lt_client)
    hits = await _hits(lt_client, "the service error 402 absentword", limit=10)
    assert _keyword_ranked(hits) == [PAYMENT]
    assert len(hits) == 10
    # Only common words: the keyword half has nothing to say, the vector half answers.
    hits = await _hits(lt_client, "error in the service", limit=10)
    assert _keyword_ranked(hits) == []
    assert len(hits) == 10


@pytest.mark.usefixtures("small_sample")
async def test_fewer_records_than_the_sample_leave_every_word_in(
    lt_client: httpx.AsyncClient,
) -> None:
    texts = [_noise(i) for i in range(SAMPLE - 2)] + [PAYMENT]
    items = [{"content": t, "embedding": deterministic_embedding(t, DIMS)} for t in texts]
    r = await lt_client.post("/v1/memory/semantic/batch", json={"items": items}, headers=A)
    assert r.status_code == 200, r.text
    hits = await _hits(lt_client, "retry absentword", limit=50)
    # Half the records hold "retry": all of them are ranked, as before.
    assert len(_keyword_ranked(hits)) == (SAMPLE - 2) // 2


@pytest.fixture
def keyword_statements() -> Iterator[list[tuple[str, Any]]]:
    """The keyword ranking statements (``ts_rank_cd``) any engine runs meanwhile."""
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "ts_rank_cd" in statement:
            seen.append((statement, parameters))

    event.listen(Engine, "before_cursor_execute", capture)
    yield seen
    event.remove(Engine, "before_cursor_execute", capture)


def _rows_matched(plan: dict[str, Any]) -> int:
    """Rows of memory_semantic that passed a full-text condition, and ids the keyword
    function (its matches through the GIN index) returned, over the whole plan."""
    total = 0
    conditions = " ".join(
        str(plan.get(key, "")) for key in ("Recheck Cond", "Index Cond", "Filter")
    )
    matched = plan.get("Relation Name") == "memory_semantic" and "@@" in conditions
    if matched or plan["Node Type"] == "ProjectSet":
        total += int(plan["Actual Rows"]) * int(plan.get("Actual Loops", 1))
    for child in plan.get("Plans", []):
        total += _rows_matched(child)
    return total


@pytest.mark.usefixtures("small_sample")
@pytest.mark.parametrize("lt_db_url", ["pgvector"], indirect=True)
async def test_keyword_query_reads_only_records_of_rare_words_on_postgres(
    lt_client: httpx.AsyncClient,
    lt_db_url: str,
    keyword_statements: list[tuple[str, Any]],
) -> None:
    """The keyword statement of a query holding a word of every record reads the
    records of its rare words only (the old query read all NOISE + 2 of them)."""
    await _seed(lt_client)
    keyword_statements.clear()
    hits = await _hits(lt_client, "the service error 402 absentword")
    assert _keyword_ranked(hits) == [PAYMENT]
    assert keyword_statements
    conn = await asyncpg.connect(lt_db_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        matched = 0
        for statement, parameters in keyword_statements:
            plan = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", *parameters)
            matched += _rows_matched(json.loads(plan)[0]["Plan"])
    finally:
        await conn.close()
    assert 1 <= matched <= 4


async def test_a_filtered_keyword_search_finds_a_match_past_the_ranking_cap(
    lt_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Matches are capped before ranking; a tag filter must apply before that cap, or
    # the one matching record that carries the tag is lost behind untagged ones.
    monkeypatch.setattr(LongTermStore, "KEYWORD_CANDIDATES", 3)
    texts = [f"quasar relay {i} calibrated" for i in range(12)]
    # The untagged ones first: stored before it, they come first out of the table.
    for batch, tags in ((texts[:-1], []), (texts[-1:], ["wanted"])):
        items = [
            {"content": t, "embedding": deterministic_embedding(t, DIMS), "tags": tags}
            for t in batch
        ]
        r = await lt_client.post("/v1/memory/semantic/batch", json={"items": items}, headers=A)
        assert r.status_code == 200, r.text
    r = await lt_client.post(
        "/v1/memory/semantic/search",
        json={"query": "quasar", "limit": 5, "tags": ["wanted"]},
        headers=A,
    )
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    assert [h["record"]["content"] for h in hits] == [texts[-1]]
    assert hits[0]["keyword_rank"] == 1
