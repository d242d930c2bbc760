"""Embedders: the offline default loads from its wheel without network; a remote provider
gets our retries and no others; the SQLite vector distance (sqlite-vec, or its Python
stand-in) is cosine distance."""

from __future__ import annotations

import asyncio
import json
import socket
from array import array
from typing import Any

import pytest
import sqlalchemy as sa

from memory_service.embeddings import (
    DeterministicEmbedder,
    LiteLLMEmbedder,
    WordLlamaEmbedder,
    check_vector,
    make_embedder,
)
from memory_service.sql import open_sql_store
from soorma_common.errors import EmbeddingUnavailable, ValidationFailed


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


@pytest.mark.parametrize(
    ("vector", "refused"),
    [
        ([0.5, -0.25, 1.0], None),
        # Finite values whose sum overflows are still finite values.
        ([1e308, 1e308, -1.0], None),
        ([0.5, float("nan"), 1.0], "finite"),
        ([float("inf"), 0.5, 1.0], "finite"),
        ([float("inf"), float("-inf"), 1.0], "finite"),
        ([0.5, 1.0], "3"),
    ],
)
def test_a_vector_must_fit_the_model_and_be_finite(
    vector: list[float], refused: str | None
) -> None:
    if refused is None:
        check_vector(vector, model="m", dimensions=3)
        return
    with pytest.raises(ValidationFailed, match=refused):
        check_vector(vector, model="m", dimensions=3)


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


class _OpenAICompatibleServer:
    """A loopback HTTP server speaking just enough of ``POST /v1/embeddings``.

    ``refuse=True``: every connection is accepted, counted and closed unanswered (a
    provider that is down); otherwise each text gets a vector ``[len(text), 1.0, ...]``.
    """

    def __init__(self, *, refuse: bool, dimensions: int = 4) -> None:
        self.refuse = refuse
        self.dimensions = dimensions
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> _OpenAICompatibleServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            if self.refuse:
                return
            while True:
                request_line = await reader.readline()
                if not request_line:
                    return
                headers: dict[str, str] = {}
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = json.loads(await reader.readexactly(int(headers["content-length"])))
                self.requests.append((request_line.decode().split()[1], headers, body))
                data = [
                    {
                        "object": "embedding",
                        "index": i,
                        "embedding": [float(len(text))] + [1.0] * (self.dimensions - 1),
                    }
                    for i, text in enumerate(body["input"])
                ]
                answer = json.dumps(
                    {
                        "object": "list",
                        "data": data,
                        "model": body["model"],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    }
                ).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(answer)}\r\n\r\n".encode()
                    + answer
                )
                await writer.drain()
        finally:
            writer.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("retries", [0, 2])
async def test_a_provider_that_is_down_gets_exactly_our_attempts(retries: int) -> None:
    """Each of our attempts is one connection: the OpenAI SDK under litellm retries
    nothing on its own (litellm reads ``max_retries=0`` as its default 2)."""
    async with _OpenAICompatibleServer(refuse=True) as server:
        embedder = LiteLLMEmbedder(
            "openai/text-embedding-3-small",
            api_base=server.url,
            api_key="test-key",
            retries=retries,
            backoff_seconds=0.01,
        )
        with pytest.raises(EmbeddingUnavailable) as caught:
            await embedder.embed(["one", "two"])
        await embedder.close()
        assert server.connections == retries + 1
        assert caught.value.details == {
            "provider": "openai",
            "model": "openai/text-embedding-3-small",
        }
        assert server.url in str(caught.value)


@pytest.mark.asyncio
async def test_an_openai_compatible_provider_embeds_in_batches_with_its_key() -> None:
    async with _OpenAICompatibleServer(refuse=False) as server:
        embedder = LiteLLMEmbedder(
            "openai/text-embedding-3-small",
            api_base=server.url,
            api_key="test-key",
            dimensions=4,
            batch_size=2,
        )
        vectors = await embedder.embed(["a", "bb", "ccc"])
        assert [v[0] for v in vectors] == [1.0, 2.0, 3.0]
        assert await embedder.dimensions() == 4
        assert [v[0] for v in await embedder.embed(["dddd"])] == [4.0]
        await embedder.close()
    # One client for the embedder's life: every call after the first reuses its connection.
    assert server.connections == 1
    assert [path for path, _, _ in server.requests] == ["/v1/embeddings"] * 3
    assert {headers["authorization"] for _, headers, _ in server.requests} == {"Bearer test-key"}
    assert [body["input"] for _, _, body in server.requests] == [["a", "bb"], ["ccc"], ["dddd"]]
    assert {body["model"] for _, _, body in server.requests} == {"text-embedding-3-small"}
    assert {body["dimensions"] for _, _, body in server.requests} == {4}
