"""Embedders: the offline default loads from its wheel without network; the SQLite
vector distance (sqlite-vec, or its Python stand-in) is cosine distance."""

from __future__ import annotations

import socket
from array import array
from typing import Any

import pytest
import sqlalchemy as sa

from memory_service.embeddings import (
    DeterministicEmbedder,
    LiteLLMEmbedder,
    WordLlamaEmbedder,
    make_embedder,
)
from memory_service.sql import open_sql_store


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.mark.asyncio
async def test_wordllama_loads_from_the_wheel_without_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_network(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the offline embedder tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    embedder = make_embedder("wordllama/l2_supercat_256")
    assert isinstance(embedder, WordLlamaEmbedder)
    assert await embedder.dimensions() == 256
    query, near, far = await embedder.embed(
        ["how do I get a refund", "refund policy for returned orders", "weather in lisbon"]
    )
    assert len(query) == 256
    assert _cos(query, near) > _cos(query, far)


@pytest.mark.asyncio
async def test_model_names_select_embedders() -> None:
    det = make_embedder("deterministic/32")
    assert isinstance(det, DeterministicEmbedder)
    assert (det.model, await det.dimensions()) == ("deterministic/32", 32)
    default_dims = make_embedder("deterministic", dimensions=48)
    assert default_dims.model == "deterministic/48"
    remote = make_embedder("ollama/nomic-embed-text", api_base="http://127.0.0.1:1")
    assert isinstance(remote, LiteLLMEmbedder)
    assert (remote.provider, remote.model) == ("ollama", "ollama/nomic-embed-text")


@pytest.mark.asyncio
async def test_sqlite_vector_distance_is_cosine_distance(tmp_path: Any) -> None:
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path}/v.db")
    try:
        a = array("f", [1.0, 0.0, 0.0]).tobytes()
        b = array("f", [1.0, 1.0, 0.0]).tobytes()
        c = array("f", [-2.0, 0.0, 0.0]).tobytes()
        async with store.engine.connect() as conn:
            same, diagonal, opposite = (
                await conn.execute(
                    sa.text(
                        "SELECT vec_distance_cosine(:a, :a), vec_distance_cosine(:a, :b), "
                        "vec_distance_cosine(:a, :c)"
                    ),
                    {"a": a, "b": b, "c": c},
                )
            ).one()
    finally:
        await store.close()
    assert same == pytest.approx(0.0, abs=1e-6)
    assert diagonal == pytest.approx(1 - 2**-0.5, abs=1e-6)
    assert opposite == pytest.approx(2.0, abs=1e-6)


def test_python_stand_in_answers_like_sqlite_vec() -> None:
    """The SQLite path uses sqlite-vec where it can load it (APSW's SQLite, a dependency
    of the service) and a Python stand-in elsewhere: both must rank alike."""
    import random

    import apsw
    import sqlite_vec

    from memory_service.longterm.dialect import _cosine_distance

    rng = random.Random(7)
    pairs = [
        ([rng.uniform(-1, 1) for _ in range(dims)], [rng.uniform(-1, 1) for _ in range(dims)])
        for dims in (3, 64, 256, 256)
    ]
    pairs.append(([1.0, 0.0], [1.0, 0.0]))
    conn = apsw.Connection(":memory:")
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    from_sqlite_vec = [
        conn.execute(
            "SELECT vec_distance_cosine(?, ?)",
            (array("f", a).tobytes(), array("f", b).tobytes()),
        ).fetchone()[0]
        for a, b in pairs
    ]
    conn.close()
    ours = [_cosine_distance(array("f", a).tobytes(), array("f", b).tobytes()) for a, b in pairs]
    assert ours == pytest.approx(from_sqlite_vec, abs=1e-5)
