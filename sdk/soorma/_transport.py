"""A lean HTTP/1.1 keep-alive transport for the SDK's shared ``httpx.AsyncClient``.

The SDK makes ~10 small JSON requests per plan step to services on plain ``http``; with
httpcore each one costs two socket writes (headers, then body), a scan of every idle
connection in the pool and the h11 state machine. :class:`LeanTransport` keeps httpx's
public API (clients still call ``http.request(...)``) and replaces only the wire layer
for those requests: one write per request, a minimal response parser (Content-Length,
chunked or read-to-close bodies) and a LIFO stack of idle connections per host.

Anything it does not handle goes to httpx's own ``AsyncHTTPTransport``: ``https``,
``Accept: text/event-stream`` (SSE must stream; this transport buffers bodies) and
request bodies that are streams rather than bytes. ``SOORMA_HTTP_TRANSPORT=httpx``
turns it off (see :func:`make_http_client`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

import httpx

# Methods a retry cannot duplicate (RFC 9110 §9.2.2); POST/PATCH are never re-sent once
# written.
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
_NO_BODY_STATUS = frozenset({204, 304})
_MAX_HEADER_BYTES = 64 * 1024
_STREAM_LIMIT = 256 * 1024


class _Conn:
    """One keep-alive socket to a (host, port)."""

    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        # A peer that closed an idle keep-alive socket has fed EOF to the reader by the
        # time we take it from the stack: checking is free, unlike a poll() syscall.
        # Bytes waiting on an idle socket (e.g. a server's 408 before closing) would be
        # read as the next request's response, so such a socket is not reused either.
        reader = self.reader
        return not (
            reader.at_eof()
            or self.writer.is_closing()
            or reader.exception() is not None
            or getattr(reader, "_buffer", None)
        )

    def close(self) -> None:
        self.writer.close()


class _StaleConnection(Exception):
    """The peer closed the connection before sending a single response byte."""


class LeanTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 with keep-alive over asyncio streams; one write per request.

    Bodies are read completely before the response is returned (the SDK's requests
    are small JSON exchanges); streaming cases are delegated (see module docstring).

    Args:
        limits: ``max_connections`` caps requests in flight (waiting up to the pool
            timeout for a slot); ``max_keepalive_connections`` caps idle sockets kept
            per host.
        fallback: Transport for what this one does not handle; an
            ``httpx.AsyncHTTPTransport(limits=limits)`` is created on first use otherwise.
    """

    def __init__(
        self,
        *,
        limits: httpx.Limits | None = None,
        fallback: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._limits = limits or httpx.Limits(max_connections=64, max_keepalive_connections=32)
        max_idle = self._limits.max_keepalive_connections
        self._max_idle: int = 1 << 30 if max_idle is None else max_idle
        self._max_active = self._limits.max_connections
        self._fallback = fallback
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    @property
    def fallback(self) -> httpx.AsyncBaseTransport:
        """The httpx transport used for https, SSE and streamed request bodies."""
        if self._fallback is None:
            self._fallback = httpx.AsyncHTTPTransport(limits=self._limits)
        return self._fallback

    def handles(self, request: httpx.Request) -> bool:
        """Whether this transport sends ``request`` itself (else: the fallback)."""
        if request.url.scheme != "http" or not isinstance(request.stream, httpx.ByteStream):
            return False
        accept = request.headers.get("accept")
        return accept is None or "text/event-stream" not in accept

    def idle_connections(self) -> int:
        """Number of idle keep-alive sockets held (all hosts) not yet closed by the peer."""
        return sum(conn.usable() for stack in self._idle.values() for conn in stack)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not self.handles(request):
            return await self.fallback.handle_async_request(request)
        if self._closed:
            raise RuntimeError("the transport is closed")
        timeouts: Mapping[str, float | None] = request.extensions.get("timeout", {})
        if self._max_active is None:
            return await self._send(request, timeouts)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max_active)
        slots = self._slots
        if slots.locked():
            try:
                async with asyncio.timeout(timeouts.get("pool")):
                    await slots.acquire()
            except TimeoutError as exc:
                raise httpx.PoolTimeout("no free connection slot", request=request) from exc
        else:
            await slots.acquire()
        try:
            return await self._send(request, timeouts)
        finally:
            slots.release()

    async def _send(
        self, request: httpx.Request, timeouts: Mapping[str, float | None]
    ) -> httpx.Response:
        url = request.url
        key = (url.host, url.port or 80)
        payload = self._serialize(request)
        stack = self._idle.get(key)
        while stack:
            conn = stack.pop()
            if conn.usable():
                try:
                    return await self._exchange(conn, key, payload, request, timeouts)
                except _StaleConnection as exc:
                    # Closed under us between the check and the write: the server saw no
                    # complete request only if it was idle-closing; re-send only what a
                    # repeat cannot duplicate.
                    if request.method not in _IDEMPOTENT:
                        raise httpx.RemoteProtocolError(
                            "server closed the keep-alive connection without a response",
                            request=request,
                        ) from exc
                    break
            conn.close()
        conn = await self._connect(key, request, timeouts)
        try:
            return await self._exchange(conn, key, payload, request, timeouts)
        except _StaleConnection as exc:
            raise httpx.RemoteProtocolError(
                "server disconnected without sending a response", request=request
            ) from exc

    @staticmethod
    def _serialize(request: httpx.Request) -> bytes:
        # httpx has already set Host and Content-Length on the request.
        parts = [request.method.encode("ascii"), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
        for name, value in request.headers.raw:
            parts += (name, b": ", value, b"\r\n")
        parts += (b"\r\n", request.content)
        return b"".join(parts)

    async def _connect(
        self, key: tuple[str, int], request: httpx.Request, timeouts: Mapping[str, float | None]
    ) -> _Conn:
        try:
            async with asyncio.timeout(timeouts.get("connect")):
                reader, writer = await asyncio.open_connection(key[0], key[1], limit=_STREAM_LIMIT)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(
                f"connecting to {key[0]}:{key[1]} timed out", request=request
            ) from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        return _Conn(reader, writer)

    async def _exchange(
        self,
        conn: _Conn,
        key: tuple[str, int],
        payload: bytes,
        request: httpx.Request,
        timeouts: Mapping[str, float | None],
    ) -> httpx.Response:
        """Write ``payload``, read the whole response; close ``conn`` unless pooled."""
        pooled = False
        try:
            writer = conn.writer
            try:
                writer.write(payload)
                if writer.transport.get_write_buffer_size():
                    async with asyncio.timeout(timeouts.get("write")):
                        await writer.drain()
            except TimeoutError as exc:
                raise httpx.WriteTimeout("writing the request timed out", request=request) from exc
            except OSError as exc:
                raise _StaleConnection() from exc
            try:
                # One deadline for the whole response (httpx's is per socket read): the
                # SDK's bodies are small, and one timer per request is cheaper.
                async with asyncio.timeout(timeouts.get("read")):
                    status, reason, headers, keep_alive = await self._read_head(conn, request)
                    body, keep_alive = await self._read_body(
                        conn, request, status, headers, keep_alive
                    )
            except TimeoutError as exc:
                raise httpx.ReadTimeout("reading the response timed out", request=request) from exc
            if keep_alive and not self._closed:
                stack = self._idle.setdefault(key, [])
                if len(stack) < self._max_idle:
                    stack.append(conn)
                    pooled = True
            return httpx.Response(
                status,
                headers=headers,
                stream=httpx.ByteStream(body),
                extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
            )
        finally:
            if not pooled:
                conn.close()

    @staticmethod
    async def _read_head(
        conn: _Conn, request: httpx.Request
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bool]:
        reader = conn.reader
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as exc:
                if not exc.partial:
                    raise _StaleConnection() from exc
                raise httpx.RemoteProtocolError(
                    "server disconnected in the middle of the response headers",
                    request=request,
                ) from exc
            except asyncio.LimitOverrunError as exc:
                raise httpx.RemoteProtocolError(
                    "response headers too large", request=request
                ) from exc
            except OSError as exc:
                # A reset before any response byte is the same as a stale socket.
                raise _StaleConnection() from exc
            lines = head[:-4].split(b"\r\n")
            status_line = lines[0].split(b" ", 2)
            try:
                version = status_line[0]
                status = int(status_line[1])
            except (IndexError, ValueError) as exc:
                raise httpx.RemoteProtocolError(
                    f"malformed status line {lines[0][:100]!r}", request=request
                ) from exc
            if 100 <= status < 200:
                continue  # interim response (we never send Expect; be lenient)
            reason = status_line[2] if len(status_line) > 2 else b""
            headers: list[tuple[bytes, bytes]] = []
            for line in lines[1:]:
                name, sep, value = line.partition(b":")
                if not sep:
                    raise httpx.RemoteProtocolError(
                        f"malformed header line {line[:100]!r}", request=request
                    )
                headers.append((name.strip(), value.strip()))
            keep_alive = version == b"HTTP/1.1"
            return status, reason, headers, keep_alive

    @staticmethod
    async def _read_body(
        conn: _Conn,
        request: httpx.Request,
        status: int,
        headers: list[tuple[bytes, bytes]],
        keep_alive: bool,
    ) -> tuple[bytes, bool]:
        length: int | None = None
        chunked = False
        for name, value in headers:
            lname = name.lower()
            if lname == b"content-length":
                try:
                    length = int(value)
                except ValueError as exc:
                    raise httpx.RemoteProtocolError(
                        f"bad Content-Length {value[:40]!r}", request=request
                    ) from exc
            elif lname == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif lname == b"connection":
                token = value.lower()
                if b"close" in token:
                    keep_alive = False
                elif b"keep-alive" in token:
                    keep_alive = True
        if b"close" in request.headers.get("connection", "").lower().encode():
            keep_alive = False
        reader = conn.reader
        try:
            if request.method == "HEAD" or status in _NO_BODY_STATUS:
                return b"", keep_alive
            if chunked:
                return await _read_chunked(reader, request), keep_alive
            if length is not None:
                return await reader.readexactly(length), keep_alive
            # Neither length nor chunking: the body ends when the server closes.
            return await reader.read(), False
        except asyncio.IncompleteReadError as exc:
            raise httpx.RemoteProtocolError(
                "server disconnected in the middle of the response body", request=request
            ) from exc
        except OSError as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc

    async def aclose(self) -> None:
        self._closed = True
        for stack in self._idle.values():
            for conn in stack:
                conn.close()
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()


async def _read_chunked(reader: asyncio.StreamReader, request: httpx.Request) -> bytes:
    parts: list[bytes] = []
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise httpx.RemoteProtocolError(
                f"bad chunk size line {line[:40]!r}", request=request
            ) from exc
        if size == 0:
            # Trailers (ignored) end with an empty line.
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise httpx.RemoteProtocolError("chunk not followed by CRLF", request=request)


HTTP_TRANSPORT_ENV = "SOORMA_HTTP_TRANSPORT"


def make_http_client(
    *, limits: httpx.Limits, environ: Mapping[str, str] | None = None
) -> httpx.AsyncClient:
    """The SDK's shared client: :class:`LeanTransport` unless the env says ``httpx``.

    Args:
        limits: Connection limits for whichever transport is used.
        environ: Environment to read ``SOORMA_HTTP_TRANSPORT`` from (``os.environ``).
    """
    env = os.environ if environ is None else environ
    choice = (env.get(HTTP_TRANSPORT_ENV) or "lean").strip().lower()
    if choice == "httpx":
        return httpx.AsyncClient(limits=limits)
    if choice != "lean":
        raise ValueError(f"{HTTP_TRANSPORT_ENV} must be 'lean' or 'httpx', not {choice!r}")
    return httpx.AsyncClient(limits=limits, transport=LeanTransport(limits=limits))


__all__ = ["HTTP_TRANSPORT_ENV", "LeanTransport", "make_http_client"]
