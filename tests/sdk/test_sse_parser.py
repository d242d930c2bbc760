"""SSE frames as the SDK reads them (httpx-sse's parser under the SDK's stream loop).

The bytes go through a real ``httpx.Response`` stream, cut into chunks anywhere, as a
socket delivers them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from soorma._sse import SSEConnectionLost, SSEFrame, _frames

pytestmark = pytest.mark.asyncio


def response(chunks: list[bytes], content_type: str = "text/event-stream") -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return httpx.Response(200, headers={"content-type": content_type}, content=body())


async def frames(chunks: list[bytes]) -> list[SSEFrame]:
    out: list[SSEFrame] = []
    with pytest.raises(SSEConnectionLost, match="closed by the server"):
        async for frame in _frames(response(chunks), heartbeat_timeout=5):
            out.append(frame)
    return out


async def test_parses_event_id_and_data_frames() -> None:
    raw = b'event: message\nid: t=1-0\ndata: {"a": 1}\n\nevent: heartbeat\n\n'
    assert await frames([raw]) == [
        SSEFrame(event="message", data='{"a": 1}', id="t=1-0"),
        # The last event id carries over to later frames, as the SSE format defines.
        SSEFrame(event="heartbeat", data="", id="t=1-0"),
    ]


async def test_multi_line_data_is_joined_and_comments_are_ignored() -> None:
    raw = b": keep-alive\n\ndata: one\ndata:two\n\n"
    assert await frames([raw]) == [SSEFrame(event="message", data="one\ntwo", id=None)]


async def test_a_blank_line_after_a_comment_delivers_nothing_even_after_an_id() -> None:
    raw = b"id: 7\ndata: x\n\n: keep-alive\n\ndata: y\n\n"
    assert [f.data for f in await frames([raw])] == ["x", "y"]


async def test_lines_end_at_lf_crlf_and_cr_only() -> None:
    text = 'data: {"t": "a\u2028b\u2029c\u0085d\x0be\x0cf\x1cg"}'
    raw = f"{text}\n\ndata: x\r\n\r\ndata: y\r\rdata: z\n\n".encode()
    assert [f.data for f in await frames([raw])] == [text[6:], "x", "y", "z"]


async def test_a_crlf_split_across_chunks_is_one_line_end() -> None:
    assert [f.data for f in await frames([b"data: a\r", b"\n\r", b"\ndata: b\r", b"\r"])] == [
        "a",
        "b",
    ]


async def test_lines_and_utf8_characters_cut_across_chunks_are_reassembled() -> None:
    raw = "data: é\u2028ü\n\n".encode()
    chunks = [raw[i : i + 1] for i in range(len(raw))]
    assert await frames(chunks) == [SSEFrame(data="é\u2028ü")]


async def test_a_silent_stream_is_reported_lost() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"event: ready\ndata: {}\n\n"
        await asyncio.sleep(10)
        yield b""

    silent = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())
    got: list[SSEFrame] = []
    with pytest.raises(SSEConnectionLost, match="no data or heartbeat"):
        async for frame in _frames(silent, heartbeat_timeout=0.1):
            got.append(frame)
    assert [f.event for f in got] == ["ready"]


async def test_slow_handling_of_a_frame_is_not_silence() -> None:
    """The deadline covers waiting for bytes, never the consumer's own work."""
    got: list[str] = []
    async for frame in _frames(response([b"data: a\n\ndata: b\n\n"]), heartbeat_timeout=0.05):
        got.append(frame.data)
        await asyncio.sleep(0.15)
        if len(got) == 2:
            break
    assert got == ["a", "b"]


async def test_a_response_that_is_not_an_event_stream_is_a_lost_connection() -> None:
    with pytest.raises(SSEConnectionLost, match="text/event-stream"):
        async for _ in _frames(response([b"<html>"], "text/html"), heartbeat_timeout=5):
            pass
