"""Serving a service under uvicorn, bounded against clients that hold connections open.

uvicorn limits neither the size of a request's headers (with httptools) nor how long a
client may take to send them: a client that sends half a request line holds its
connection (and a file descriptor) forever. The protocol classes here add both bounds:

- **header size**: a request whose request line and headers exceed ``max_header_bytes``
  is answered ``431`` and the connection closed, before the parser reads them;
- **header-read timeout**: a connection that has not sent a complete request head
  ``header_timeout`` seconds after it opened (or after it started its next request) is
  answered ``408`` and closed (by a sweep that runs four times per timeout, so within
  1.25 timeouts; a request pays only for reading the loop's clock). Idle keep-alive
  connections are closed by uvicorn's own ``timeout_keep_alive``.

They also send a response's head and body in one write (:class:`_OneWrite`): uvicorn
writes the head when the app starts its response and the body when it sends it, two
``send`` calls on the socket, and on loopback each one delivers to the client and wakes
it.

``python -m servicekit.server module:create_app`` serves an app factory this way (the
container image's command); ``soorma dev`` uses :func:`uvicorn_options` too.
"""

from __future__ import annotations

import argparse
import asyncio
import weakref
from collections.abc import Sequence
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from servicekit.settings import LimitsSettings

try:  # the platform's default parser; h11 when httptools is not installed
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - depends on the installation
    HttpToolsProtocol = None


def _response(status: bytes) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(status)).encode() + b"\r\nconnection: close\r\n\r\n" + status
    )


TOO_LARGE = _response(b"431 Request Header Fields Too Large")
TIMED_OUT = _response(b"408 Request Timeout")
END_OF_HEAD = b"\r\n\r\n"


class _OneWrite:
    """A transport that joins the writes made in one turn of the event loop into one.

    The first write of a turn is held and a flush scheduled with ``call_soon``; writes
    until then join it, so a response whose head and body are sent one after the other
    (uvicorn writes each as it gets it) leaves in one ``send``. Order is kept: every
    write goes through here, and closing (or ending the writing side) flushes first.
    Everything else is the wrapped transport's.
    """

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        if not isinstance(data, bytes):
            data = bytes(data)  # held past the call: a caller's buffer may change
        if self._held is None:
            self._held = [data]
            self._loop.call_soon(self._flush)
        else:
            self._held.append(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _OneWritePerTurn:
    """Mixed into a uvicorn HTTP protocol: its transport is a :class:`_OneWrite`."""

    def connection_made(self, transport: asyncio.Transport) -> None:
        joined = _OneWrite(transport, asyncio.get_running_loop())
        super().connection_made(joined)  # type: ignore[misc]


class _HeadGuard:
    """Mixed into a uvicorn HTTP protocol: bounds the size and reading time of a request head.

    A request head is being read from the connection's first byte (or a finished
    response) until the protocol starts a new request cycle (its headers are complete).
    """

    max_header_bytes: int = 32 * 1024
    header_timeout: float = 10.0

    # Attributes of the uvicorn protocol this is mixed into.
    cycle: Any
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    _head_started: float | None = None  # loop time the current head began; None: not reading
    _head_cycle: Any = None
    _head_bytes = 0
    _head_tail = b""

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_head()
        super().connection_lost(exc)  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        if self._head_started is None and (self.cycle is None or self.cycle.response_complete):
            self._start_head()  # the first bytes of the next request on this connection
        reading = self._head_started is not None
        if reading:
            self._head_bytes += self._head_part(data)
            if self._head_bytes > self.max_header_bytes:
                self._refuse(TOO_LARGE)
                return
        super().data_received(data)  # type: ignore[misc]
        if reading and self.cycle is not self._head_cycle:
            self._end_head()  # head complete: a request cycle started

    def _head_part(self, data: bytes) -> int:
        """How many bytes of ``data`` belong to the head (counted before parsing).

        The head ends with a blank line, which may straddle two reads.
        """
        tail = self._head_tail
        if tail:
            straddling = (tail + data[:3]).find(END_OF_HEAD)
            if straddling >= 0:
                return max(0, straddling + 4 - len(tail))
        end = data.find(END_OF_HEAD)
        if end >= 0:
            return end + 4
        self._head_tail = (tail + data[-3:])[-3:]
        return len(data)

    def _start_head(self) -> None:
        self._head_cycle = self.cycle
        self._head_bytes = 0
        self._head_tail = b""
        self._head_started = self.loop.time()
        _sweeper(self.loop).watch(self)

    def _end_head(self) -> None:
        self._head_started = None

    def _refuse(self, response: bytes) -> None:
        self._end_head()
        if not self.transport.is_closing():
            self.transport.write(response)
            self.transport.close()


class _HeadSweeper:
    """Closes, a few times per timeout, the connections of one loop that are late with a head.

    One timer per loop instead of one per request: a request pays for a clock read.
    A late connection is closed between 1 and 1.25 header timeouts after its head began.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.watched: set[_HeadGuard] = set()
        self.timer: asyncio.TimerHandle | None = None
        self.interval = 0.0

    def watch(self, guard: _HeadGuard) -> None:
        self.watched.add(guard)
        interval = guard.header_timeout / 4
        if self.timer is None or interval < self.interval:
            if self.timer is not None:
                self.timer.cancel()
            self.interval = interval
            self.timer = self.loop.call_later(interval, self.sweep)

    def sweep(self) -> None:
        self.timer = None
        now = self.loop.time()
        for guard in list(self.watched):
            started = guard._head_started
            if started is None:
                self.watched.discard(guard)  # between requests (keep-alive) or gone
            elif now - started >= guard.header_timeout:
                self.watched.discard(guard)
                guard._refuse(TIMED_OUT)
        if self.watched:
            self.timer = self.loop.call_later(self.interval, self.sweep)


_SWEEPERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _HeadSweeper] = (
    weakref.WeakKeyDictionary()
)


def _sweeper(loop: asyncio.AbstractEventLoop) -> _HeadSweeper:
    found = _SWEEPERS.get(loop)
    if found is None:
        found = _SWEEPERS[loop] = _HeadSweeper(loop)
    return found


if HttpToolsProtocol is not None:

    class GuardedHttpToolsProtocol(  # type: ignore[misc]
        _OneWritePerTurn, _HeadGuard, HttpToolsProtocol
    ):
        """httptools with :class:`_HeadGuard`, one write per turn."""


class GuardedH11Protocol(_OneWritePerTurn, _HeadGuard, H11Protocol):
    """h11 with :class:`_HeadGuard`, one write per turn."""


def guarded_protocol(*, max_header_bytes: int, header_timeout: float) -> type[asyncio.Protocol]:
    """The HTTP protocol class (httptools when installed, else h11) with these bounds."""
    base: type[Any] = (
        GuardedHttpToolsProtocol if HttpToolsProtocol is not None else GuardedH11Protocol
    )
    return type(
        base.__name__,
        (base,),
        {
            "max_header_bytes": max_header_bytes,
            "header_timeout": header_timeout,
        },
    )


def uvicorn_options(settings: LimitsSettings) -> dict[str, Any]:
    """``uvicorn.Config`` keyword arguments bounding request heads as ``settings`` say."""
    return {
        "http": guarded_protocol(
            max_header_bytes=settings.max_header_bytes,
            header_timeout=settings.header_timeout_seconds,
        ),
        "h11_max_incomplete_event_size": settings.max_header_bytes,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m servicekit.server pkg.module:create_app --host H --port P``."""
    parser = argparse.ArgumentParser(prog="python -m servicekit.server")
    parser.add_argument("factory", help="import string of the app factory (module:function)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    options = uvicorn_options(LimitsSettings())
    uvicorn.run(
        args.factory,
        factory=True,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        loop="auto",
        ws="none",
        **options,
    )


if __name__ == "__main__":
    main()
