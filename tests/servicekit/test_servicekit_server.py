"""Real uvicorn, raw sockets: request heads are bounded in size and in reading time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from event_service import create_app
from servicekit.server import uvicorn_options
from testsupport.server import free_port
from testsupport.services import event_settings

pytestmark = pytest.mark.asyncio

HEADER_TIMEOUT = 0.5
MAX_HEADER_BYTES = 8 * 1024


# The servers _served started, by port (a test reaches its connections' transports).
SERVERS: dict[int, uvicorn.Server] = {}


@contextlib.asynccontextmanager
async def _served(http: str | None = None) -> AsyncIterator[int]:
    """The event service under uvicorn with the platform's serving options; its port."""
    settings = event_settings(
        max_header_bytes=MAX_HEADER_BYTES, header_timeout_seconds=HEADER_TIMEOUT
    )
    options: dict[str, Any] = uvicorn_options(settings)
    if http == "h11":
        from servicekit.server import GuardedH11Protocol

        options["http"] = type(
            "H11",
            (GuardedH11Protocol,),
            {"header_timeout": HEADER_TIMEOUT, "max_header_bytes": MAX_HEADER_BYTES},
        )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
            ws="none",
            **options,
        )
    )
    task = asyncio.create_task(server.serve())
    SERVERS[port] = server
    try:
        while not server.started:
            assert not task.done(), "uvicorn exited"
            await asyncio.sleep(0.01)
        yield port
    finally:
        SERVERS.pop(port, None)
        server.should_exit = True
        await asyncio.wait_for(task, 10)


async def _exchange(port: int, data: bytes, *, wait: float = 10.0) -> tuple[bytes, float]:
    """Send ``data`` (and nothing more); everything read until the server closes, and when."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    try:
        if data:
            writer.write(data)
            await writer.drain()
        try:
            answer = await asyncio.wait_for(reader.read(), wait)  # until EOF
        except ConnectionResetError:
            # Closed with our bytes still unread: a loop that stalled past the timeout
            # (loaded machine) may run the timer before the read. Closed all the same.
            answer = b"<reset>"
        return answer, time.monotonic() - started
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


@pytest.mark.parametrize("http", [None, "h11"])
@pytest.mark.parametrize(
    "sent",
    [
        pytest.param(b"", id="nothing"),
        pytest.param(b"GET /health HT", id="half-a-request-line"),
        pytest.param(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ", id="half-the-headers"),
    ],
)
async def test_a_half_sent_request_is_closed_after_the_header_timeout(
    http: str | None, sent: bytes
) -> None:
    async with _served(http) as port:
        answer, took = await _exchange(port, sent)
    # Closed by the server (EOF before our 10 s bound), having told the client why.
    assert took < 10
    if sent:
        assert answer.startswith(b"HTTP/1.1 408") or answer == b"<reset>", answer


async def test_the_next_request_on_a_kept_alive_connection_is_timed_too() -> None:
    async with _served() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200"), head
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await asyncio.wait_for(reader.readexactly(length), 10)  # the whole first answer
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            await writer.drain()
            rest = await asyncio.wait_for(reader.read(), 10)
            assert rest.startswith(b"HTTP/1.1 408"), rest
        finally:
            writer.close()


@pytest.mark.parametrize("http", [None, "h11"])
@pytest.mark.parametrize("complete", [True, False], ids=["whole-head", "endless-head"])
async def test_request_heads_over_the_limit_are_refused(http: str | None, complete: bool) -> None:
    big = b"X-Big: " + b"a" * (MAX_HEADER_BYTES + 100) + b"\r\n"
    head = b"GET /health HTTP/1.1\r\nHost: x\r\n" + big + (b"\r\n" if complete else b"")
    async with _served(http) as port:
        answer, took = await _exchange(port, head)
    assert took < 10
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large"), answer[:200]


async def test_ordinary_requests_and_streams_are_unaffected() -> None:
    async with _served() as port:
        answer, _ = await _exchange(
            port,
            b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            + b"X-Fine: "
            + b"b" * 4000
            + b"\r\n\r\n",
        )
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        # An SSE stream outlives the header timeout: only the head is timed.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(
                b"GET /v1/events/stream?topics=system-events&heartbeat=0.5 "
                b"HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            await writer.drain()
            got = b""
            async with asyncio.timeout(10):
                while got.count(b"event: heartbeat") < 3:  # 1.5 s > 3 header timeouts
                    got += await reader.read(4096)
            assert got.startswith(b"HTTP/1.1 200")
        finally:
            writer.close()


class _Recorded:
    """A transport's stand-in that records what is written to it."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


async def test_the_writes_of_one_turn_leave_as_one_in_order() -> None:
    from servicekit.server import _OneWrite

    recorded = _Recorded()
    joined = _OneWrite(recorded, asyncio.get_running_loop())  # type: ignore[arg-type]
    buffer = bytearray(b"body")
    joined.write(b"head ")
    joined.writelines([buffer, b"!"])
    buffer[:] = b"XXXX"  # a caller reusing its buffer changes nothing already written
    assert recorded.writes == []
    await asyncio.sleep(0)
    assert recorded.writes == [b"head body!"]
    assert joined.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest passes through
    joined.write(b"last")
    joined.close()  # what is held leaves before the close
    assert recorded.writes == [b"head body!", b"last"] and recorded.closed
    joined.write(b"after")
    await asyncio.sleep(0)
    assert recorded.writes == [b"head body!", b"last"]  # nothing onto a closing transport


@pytest.mark.parametrize("http", [None, "h11"])
async def test_a_response_leaves_in_one_write(http: str | None) -> None:
    """uvicorn writes a response's head and its body separately; the platform's protocol
    sends them in one write (one send on the socket: on loopback each one wakes the
    client)."""
    async with _served(http) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            connections = SERVERS[port].server_state.connections
            for _ in range(1000):  # the server accepts the connection
                if connections:
                    break
                await asyncio.sleep(0.01)
            (protocol,) = connections
            sent: list[bytes] = []
            # The socket's own transport, under the platform's joining one.
            socket_transport = getattr(protocol.transport, "_transport", protocol.transport)
            real_write = socket_transport.write

            def counted(data: bytes) -> None:
                sent.append(bytes(data))
                real_write(data)

            socket_transport.write = counted
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 10)
        finally:
            writer.close()
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"}"), answer
    assert sent == [answer]


async def test_soorma_dev_serves_with_the_same_bounds() -> None:
    from servicekit.server import _HeadGuard
    from soorma._dev import _make_server

    settings = event_settings(max_header_bytes=4096, header_timeout_seconds=1.5)
    server = _make_server(create_app(settings), "127.0.0.1", free_port(), "warning")
    protocol = server.config.http
    assert issubclass(protocol, _HeadGuard)
    assert (protocol.max_header_bytes, protocol.header_timeout) == (4096, 1.5)


async def test_the_container_command_serves_with_the_bounds_from_the_environment() -> None:
    # The image runs ``python -m servicekit.server $SOORMA_SERVICE_APP`` (Dockerfile).
    port = free_port()
    env = {
        **os.environ,
        "SOORMA_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
        "SOORMA_EVENT_BACKEND": "memory",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "servicekit.server",
        "event_service.app:create_app",
        "--port",
        str(port),
        "--log-level",
        "warning",
        env=env,
    )
    try:
        async with asyncio.timeout(30):
            while True:
                try:
                    answer, _ = await _exchange(port, b"GET /health HT")
                    break
                except ConnectionError:
                    await asyncio.sleep(0.1)
        assert answer.startswith(b"HTTP/1.1 408"), answer
    finally:
        process.terminate()
        await process.wait()
