"""The keyword half of hybrid search: PostgreSQL full-text (``tsv``, GIN) or SQLite FTS5.

Reciprocal-rank fusion needs only the best few keyword matches, but ordering by
relevance needs the relevance of *every* matching record. A word found in a large share
of the records a search can see (``the``, ``report``, a product name every document
carries) matches tens of thousands of them at 100,000 records, and carries no signal
for the fused ranking. So, like a search engine's high-frequency cutoff, the keyword
query leaves out the common words: a word is common when it occurs in more than
``COMMON_TERM_SHARE`` of a sample of ``KEYWORD_SAMPLE`` records in the search's scope
(tenant, user or public, filters). Below ``KEYWORD_SAMPLE`` records nothing is left out
(ranking every match is cheap there), so small collections rank exactly as before. What
is left (codes, names, rare words) matches few records; at most ``cap`` of them are
ranked all the same.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_service.longterm.dialect import Dialect, keyword_terms
from memory_service.longterm.schema import KEYWORD_FUNCTION

# Records of the search's scope read to tell common words (see the module's docstring).
KEYWORD_SAMPLE = 1000
# A word in more than this share of the sample is left out of the keyword query.
COMMON_TERM_SHARE = 0.05


async def common_terms(
    conn: AsyncConnection,
    d: Dialect,
    terms: list[str],
    scope: str,
    params: dict[str, Any],
    *,
    sample: int = KEYWORD_SAMPLE,
    share: float = COMMON_TERM_SHARE,
) -> set[str]:
    """The query words found in more than ``share`` of a sample of ``sample`` records of
    ``scope`` (alias ``s``, parameters in ``params``); none when fewer records exist."""
    limit = int(sample * share)
    args = {**params, "sample": sample}
    if d.pg:
        args.update(terms=list(dict.fromkeys(terms)), common=limit)
        # One query per search: the sample is read once (materialized), each word is
        # parsed once and looked up in every sampled tsvector.
        sql = (
            "WITH sample AS MATERIALIZED "
            f"(SELECT s.tsv FROM memory_semantic s WHERE {scope} LIMIT :sample) "
            "SELECT t.term FROM unnest(CAST(:terms AS text[])) AS t(term) "
            "CROSS JOIN LATERAL to_tsquery('simple', t.term) AS q "
            "WHERE (SELECT count(*) FROM sample) >= :sample "
            "AND (SELECT count(*) FROM sample WHERE sample.tsv @@ q) > :common"
        )
        return {r.term for r in await conn.execute(text(sql), args)}
    rows = await conn.execute(
        text(f"SELECT s.content FROM memory_semantic s WHERE {scope} LIMIT :sample"), args
    )
    contents = [r.content for r in rows]
    if len(contents) < sample:
        return set()
    wanted = set(terms)
    seen: Counter[str] = Counter()
    for content in contents:
        # The words as keyword_terms sees them (FTS5's tokenizer splits alike).
        seen.update(wanted.intersection(keyword_terms(content)))
    return {term for term, count in seen.items() if count > limit}


async def keyword_ranking(
    conn: AsyncConnection,
    d: Dialect,
    terms: list[str],
    scope: str,
    params: dict[str, Any],
    *,
    k: int,
    cap: int,
    include_public: bool,
    filtered: bool = False,
    sample: int = KEYWORD_SAMPLE,
    share: float = COMMON_TERM_SHARE,
) -> list[tuple[str, float]]:
    """The best ``k`` records of ``scope`` for ``terms`` (common words left out, see
    :func:`common_terms`) as ``(id, relevance)``, best first.

    ``filtered``: the scope has tag, source or metadata conditions beyond the user's
    (and public) records; the index's matches are then not capped before them, or
    matching records past the cap would be lost to the filters.
    """
    common = await common_terms(conn, d, terms, scope, params, sample=sample, share=share)
    terms = [term for term in terms if term not in common]
    params = {
        **params,
        "k": k,
        "cap": cap,
        "public": include_public,
        "index_cap": None if filtered else cap,
    }
    hits: list[tuple[str, float]] = []
    # Records holding every query word (exact codes, names); when no record holds them
    # all, records holding any of them, ranked by relevance (a natural-language question
    # rarely shares every word with a passage).
    for joiner in (" & ", " | ") if d.pg else (" ", " OR "):
        if hits or not terms or (joiner in (" | ", " OR ") and len(terms) < 2):
            break
        # At most ``cap`` matching records are ranked: a query of many words can still
        # match many records; below the cap nothing changes.
        if d.pg:
            params["kq"] = joiner.join(terms)
            sql = (
                # The user's (and public) matches through the GIN index
                # (KEYWORD_FUNCTION: the policy keeps a query on the table from using
                # it), then this search's whole scope on them, in the RLS role.
                "SELECT m.id, ts_rank_cd(m.tsv, kq) AS relevance FROM "
                "(SELECT s.id, s.tsv FROM memory_semantic s WHERE s.id IN (SELECT "
                f"{KEYWORD_FUNCTION}(to_tsquery('simple', :kq), :u, :public, :index_cap)) "
                f"AND s.tsv @@ to_tsquery('simple', :kq) AND {scope} LIMIT :cap) m, "
                "to_tsquery('simple', :kq) kq ORDER BY relevance DESC, m.id LIMIT :k"
            )
        else:
            params["kq"] = joiner.join(f'"{term}"' for term in terms)
            sql = (
                # CROSS JOIN: the full-text match drives the join (with a plain JOIN,
                # SQLite 3.40 ran the match once per tenant row).
                "SELECT m.id, m.relevance FROM (SELECT s.id, "
                "-bm25(memory_semantic_fts) AS relevance "
                "FROM memory_semantic_fts CROSS JOIN memory_semantic s "
                "ON s.seq = memory_semantic_fts.rowid "
                f"WHERE memory_semantic_fts MATCH :kq AND {scope} LIMIT :cap) m "
                "ORDER BY m.relevance DESC, m.id LIMIT :k"
            )
        result = await conn.execute(text(sql), params)
        hits = [(r.id, float(r.relevance)) for r in result]
    return hits
