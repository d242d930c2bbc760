"""A lean keep-alive HTTP/1.1 client and SSE reader for benchmarks.

httpx costs ~3 ms of CPU per request on these machines, more than the server should
spend, so the load generator speaks HTTP over raw asyncio streams instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import urlsplit


class KeepAliveClient:
    """One persistent HTTP/1.1 connection; requests are sent one at a time."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._head_bytes = f"Host: {self.host}:{self.port}\r\n{extra}".encode()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        assert self._reader is not None and self._writer is not None
        self._writer.write(
            b"POST %s HTTP/1.1\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (path.encode(), self._head_bytes, len(body), body)
        )
        return await self._read_response()

    async def _read_response(self) -> tuple[int, bytes]:
        assert self._reader is not None
        head = await self._reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        at = lower.find(b"\r\ncontent-length:")
        if at >= 0:
            end = lower.index(b"\r\n", at + 2)
            return status, await self._reader.readexactly(int(lower[at + 17 : end]))
        if b"\r\ntransfer-encoding: chunked" not in lower:
            return status, b""
        body = b""
        while True:
            size = int((await self._reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await self._reader.readexactly(size + 2)
            if size == 0:
                return status, body
            body += chunk[:-2]


def _parse_frame(frame: bytes) -> tuple[str, str, bytes] | None:
    event, eid, payload = "message", "", []
    for line in frame.split(b"\n"):
        if line.startswith(b"data:"):
            payload.append(line[5:].lstrip(b" "))
        elif line.startswith(b"event:"):
            event = line[6:].strip().decode()
        elif line.startswith(b"id:"):
            eid = line[3:].strip().decode()
    if payload or event != "message":
        return event, eid, b"\n".join(payload)
    return None


async def sse_frames(
    url: str, path: str, headers: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, str, bytes]]:
    """Yield ``(event, id, data)`` for each SSE frame of a GET stream (raw socket)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.open_connection(host, port, limit=2**22)
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    writer.write(
        (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Accept: text/event-stream\r\n{extra}\r\n"
        ).encode()
    )
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"stream refused: {head[:200]!r}")
        chunked = b"chunked" in head.lower()
        buf = b""
        while True:
            if chunked:
                size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                data = await reader.readexactly(size + 2)
                if size == 0:
                    return
                data = data[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    return
            buf += data.replace(b"\r\n", b"\n") if b"\r" in data else data
            if b"\n\n" not in buf:
                continue
            # Split once per read (not once per frame): bursts carry hundreds of frames.
            frames = buf.split(b"\n\n")
            buf = frames.pop()
            for frame in frames:
                parsed = _parse_frame(frame)
                if parsed is not None:
                    yield parsed
    finally:
        writer.close()
