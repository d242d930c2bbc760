"""A TCP relay in front of a service, to cut it off and bring it back in a test."""

from __future__ import annotations

import asyncio
import contextlib

from testsupport.server import free_port


class TcpRelay:
    """Forwards ``127.0.0.1:<port>`` to ``upstream_port``: ``stop()`` makes the service
    unreachable (new connections refused, open ones cut), ``start()`` reachable again,
    on the same port."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    @property
    def running(self) -> bool:
        return self._server is not None

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._open |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._open:
            writer.close()
        self._open.clear()
        await self._server.wait_closed()
        self._server = None
