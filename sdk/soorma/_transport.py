"""A lean HTTP/1.1 keep-alive transport for the SDK's shared ``httpx.AsyncClient``.

The SDK makes ~10 small JSON requests per plan step to services on plain ``http``; with
httpcore each one costs two socket writes (headers, then body), a scan of every idle
connection in the pool and the h11 state machine. :class:`LeanTransport` keeps httpx's
public API (clients still call ``http.request(...)``) and replaces only the wire layer
for those requests: one write per request, a minimal response parser (Content-Length,
chunked or read-to-close bodies) and a LIFO stack of idle connections per host.

Anything it does not handle goes to httpx's own ``AsyncHTTPTransport``: ``https``,
``Accept: text/event-stream`` (SSE must stream; this transport buffers bodies) and
request bodies that are streams rather than bytes. Requests that ``HTTP_PROXY`` /
``HTTPS_PROXY`` / ``ALL_PROXY`` send through a proxy (``NO_PROXY`` exempts hosts) go to
httpx's proxy transport, mounted as httpx itself mounts them (see
:func:`environment_proxy_mounts`). The client is a plain ``httpx.AsyncClient`` given this
transport through httpx's public ``transport=``/``mounts=`` interface (:func:`lean_client`).
``SOORMA_HTTP_TRANSPORT=httpx`` turns it off (see :func:`make_http_client`).

Why not a maintained client underneath: httpx-aiohttp (aiohttp's C parser behind httpx's
API) costs ~45 % more client CPU per request than this transport and httpx's own ~150 %
more (``bench/transport.py``, ``docs/benchmarks.md``). What keeps this parser safe: it
accepts a strict subset of what h11 accepts and, where both accept, reads the same
response (``tests/sdk/test_transport_differential.py`` checks that with hypothesis):
one numeric ``Content-Length`` or exactly ``Transfer-Encoding: chunked``, never both,
token-checked header names, bodies capped at ``max_body_bytes``.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import ssl
import urllib.request
from collections.abc import Mapping
from typing import Any, Literal

import httpx

# Methods a retry cannot duplicate (RFC 9110 §9.2.2); POST/PATCH are never re-sent once
# written.
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
_NO_BODY_STATUS = frozenset({204, 304})
_STREAM_LIMIT = 64 * 1024  # also the longest response head (status line + headers)
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
_READ_SIZE = 64 * 1024

# RFC 9112 grammar: status line, header field, chunk size line. Values are VCHAR or
# obs-text words separated by spaces/tabs; control characters are refused.
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([\t \x21-\x7e\x80-\xff]*))?")
_HEADER = re.compile(
    rb"([-!#$%&'*+.^_`|~0-9A-Za-z]+):[ \t]*"
    rb"((?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?)[ \t]*"
)
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})(?:;[\t \x21-\x7e\x80-\xff]*)?[ \t]*\r\n")
_DIGITS = re.compile(rb"[0-9]{1,18}")


@functools.cache
def verified_tls() -> ssl.SSLContext:
    """The process's one certificate-checking TLS context, as httpx makes it by default.

    httpx loads the CA bundle for every transport it creates (~15-20 ms of CPU); every
    SDK client shares this one instead. It honours ``SSL_CERT_FILE``/``SSL_CERT_DIR`` as
    they are when it is first needed.
    """
    return httpx.create_ssl_context()


class _Reader(asyncio.StreamReader):
    """A stream reader that knows whether bytes are waiting that no one has read.

    Counts what the socket delivered and what the response parser took (it reads only
    with ``readuntil`` and ``readexactly`` on a connection it may reuse).
    """

    received = 0
    taken = 0

    def feed_data(self, data: Any) -> None:
        self.received += len(data)
        super().feed_data(data)

    async def readuntil(self, separator: Any = b"\n") -> bytes:
        data = await super().readuntil(separator)
        self.taken += len(data)
        return data

    async def readexactly(self, n: int) -> bytes:
        data = await super().readexactly(n)
        self.taken += len(data)
        return data

    def unread(self) -> bool:
        """Whether bytes arrived beyond the responses read so far."""
        return self.received > self.taken


class _Conn:
    """One keep-alive socket to a (host, port)."""

    __slots__ = ("reader", "writer")

    def __init__(self, reader: _Reader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        # A peer that closed an idle keep-alive socket has fed EOF to the reader by the
        # time we take it from the stack: checking is free, unlike a poll() syscall.
        # Bytes waiting on an idle socket (e.g. a server's 408 before closing) would be
        # read as the next request's response, so such a socket is not reused either.
        reader = self.reader
        return not (
            reader.unread()
            or reader.at_eof()
            or self.writer.is_closing()
            or reader.exception() is not None
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
        max_body_bytes: Largest response body accepted (``RemoteProtocolError`` past it),
            whatever its framing.
    """

    def __init__(
        self,
        *,
        limits: httpx.Limits | None = None,
        fallback: httpx.AsyncBaseTransport | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.max_body_bytes = max_body_bytes
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
            self._fallback = httpx.AsyncHTTPTransport(limits=self._limits, verify=verified_tls())
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
        loop = asyncio.get_running_loop()
        reader = _Reader(limit=_STREAM_LIMIT, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        try:
            async with asyncio.timeout(timeouts.get("connect")):
                transport, _ = await loop.create_connection(lambda: protocol, key[0], key[1])
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(
                f"connecting to {key[0]}:{key[1]} timed out", request=request
            ) from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        return _Conn(reader, asyncio.StreamWriter(transport, protocol, reader, loop))

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
                    status, reason, headers, body, keep_alive = await read_response(
                        conn.reader, request.method, self.max_body_bytes
                    )
            except TimeoutError as exc:
                raise httpx.ReadTimeout("reading the response timed out", request=request) from exc
            except httpx.RemoteProtocolError as exc:
                exc.request = request
                raise
            except OSError as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
            if keep_alive and b"close" in _tokens(request.headers.get("connection", "").encode()):
                keep_alive = False
            if keep_alive and not self._closed and conn.usable():
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

    async def aclose(self) -> None:
        self._closed = True
        for stack in self._idle.values():
            for conn in stack:
                conn.close()
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()


def _protocol_error(message: str) -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError(message)


def _tokens(value: bytes) -> set[bytes]:
    """The lower-cased tokens of a comma-separated header value."""
    return {token.strip(b" \t").lower() for token in value.split(b",")}


async def read_response(
    reader: asyncio.StreamReader, method: str, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, bool]:
    """Read one response: ``(status, reason, headers, body, keep_alive)``.

    Raises:
        httpx.RemoteProtocolError: a malformed or oversized response, or the peer closed
            the connection part way.
        _StaleConnection: the peer closed (or reset) before sending a single byte.
    """
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise _StaleConnection() from exc
            raise _protocol_error(
                "server disconnected in the middle of the response headers"
            ) from exc
        except asyncio.LimitOverrunError as exc:
            raise _protocol_error("response headers too large") from exc
        except OSError as exc:
            # A reset before any response byte is the same as a stale socket.
            raise _StaleConnection() from exc
        lines = head[:-4].split(b"\r\n")
        status_line = _STATUS_LINE.fullmatch(lines[0])
        if status_line is None:
            raise _protocol_error(f"malformed status line {lines[0][:100]!r}")
        status = int(status_line[2])
        headers: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            field = _HEADER.fullmatch(line)
            if field is None:
                raise _protocol_error(f"malformed header line {line[:100]!r}")
            headers.append((field[1], field[2]))
        if status == 101:
            raise _protocol_error("unexpected 101 Switching Protocols (no upgrade was asked)")
        if status >= 200:
            break
        # An interim 1xx response (we never send Expect; be lenient): the answer follows.
    length: int | None = None
    chunked = False
    keep_alive = status_line[1] == b"1"
    for name, value in headers:
        lname = name.lower()
        if lname == b"content-length":
            if length is not None or _DIGITS.fullmatch(value) is None:
                raise _protocol_error(f"bad or repeated Content-Length {value[:40]!r}")
            length = int(value)
        elif lname == b"transfer-encoding":
            if chunked or value.lower() != b"chunked":
                raise _protocol_error(f"unsupported Transfer-Encoding {value[:40]!r}")
            chunked = True
        elif lname == b"connection" and b"close" in _tokens(value):
            keep_alive = False
    if chunked and length is not None:
        # RFC 9112 §6.3: a sign of request smuggling or response splitting.
        raise _protocol_error("response has both Content-Length and Transfer-Encoding")
    reason = status_line[3] or b""
    if method == "HEAD" or status in _NO_BODY_STATUS:
        return status, reason, headers, b"", keep_alive
    try:
        if chunked:
            body = await _read_chunked(reader, max_body_bytes)
        elif length is not None:
            if length > max_body_bytes:
                raise _protocol_error(f"response body over {max_body_bytes} bytes")
            body = await reader.readexactly(length)
        else:
            # Neither length nor chunking: the body ends when the server closes.
            body = await _read_to_close(reader, max_body_bytes)
            keep_alive = False
    except asyncio.IncompleteReadError as exc:
        raise _protocol_error("server disconnected in the middle of the response body") from exc
    return status, reason, headers, body, keep_alive


async def _read_to_close(reader: asyncio.StreamReader, max_body_bytes: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while chunk := await reader.read(_READ_SIZE):
        size += len(chunk)
        if size > max_body_bytes:
            raise _protocol_error(f"response body over {max_body_bytes} bytes")
        parts.append(chunk)
    return b"".join(parts)


async def _read_chunked(reader: asyncio.StreamReader, max_body_bytes: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        line = await _read_line(reader)
        match = _CHUNK_SIZE.fullmatch(line)
        if match is None:
            raise _protocol_error(f"bad chunk size line {line[:40]!r}")
        size = int(match[1], 16)
        if size == 0:
            # Trailer fields (checked, then ignored) end with an empty line.
            while (line := await _read_line(reader)) != b"\r\n":
                if _HEADER.fullmatch(line[:-2]) is None:
                    raise _protocol_error(f"malformed trailer line {line[:100]!r}")
            return b"".join(parts)
        total += size
        if total > max_body_bytes:
            raise _protocol_error(f"response body over {max_body_bytes} bytes")
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise _protocol_error("chunk not followed by CRLF")


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n")
    except asyncio.LimitOverrunError as exc:
        raise _protocol_error("chunk size or trailer line too long") from exc


def environment_proxy_mounts(
    limits: httpx.Limits,
) -> dict[str, httpx.AsyncBaseTransport | None]:
    """``mounts=`` for ``httpx.AsyncClient`` routing requests as the proxy variables say.

    httpx reads ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` itself only
    when no ``transport=`` is given; the SDK passes its own transport, so it mounts the
    proxies the same way: a proxy transport per scheme the variables name, and ``None``
    (the client's own transport, so direct) for each ``NO_PROXY`` entry, following curl's
    rules (``*`` turns proxies off; ``.example.com`` covers subdomains only, ``example.com``
    the domain and its subdomains; IP addresses and ``localhost`` match exactly).
    """
    found = urllib.request.getproxies()
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
    for scheme in ("http", "https", "all"):
        url = found.get(scheme)
        if url:
            proxy = url if "://" in url else f"http://{url}"
            mounts[f"{scheme}://"] = httpx.AsyncHTTPTransport(
                proxy=proxy, limits=limits, verify=verified_tls()
            )
    if not mounts:
        return {}
    for host in (entry.strip() for entry in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if not host:
            continue
        if "://" in host:
            mounts[host] = None
        elif _is_ip(host, ipaddress.IPv6Address):
            mounts[f"all://[{host}]"] = None
        elif _is_ip(host, ipaddress.IPv4Address) or host.lower() == "localhost":
            mounts[f"all://{host}"] = None
        else:
            mounts[f"all://*{host}"] = None
    return mounts


def _is_ip(host: str, kind: type[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> bool:
    try:
        kind(host.split("/")[0])
    except ValueError:
        return False
    return True


def lean_client(*, limits: httpx.Limits) -> httpx.AsyncClient:
    """A plain ``httpx.AsyncClient`` whose transport is :class:`LeanTransport`.

    Through httpx's public interface only (``transport=`` and ``mounts=``): what the lean
    transport does not handle goes to its fallback, an ``httpx.AsyncHTTPTransport`` with
    the same limits; proxied URLs go to the proxy transports of
    :func:`environment_proxy_mounts`.
    """
    fallback = httpx.AsyncHTTPTransport(limits=limits, verify=verified_tls())
    return httpx.AsyncClient(
        transport=LeanTransport(limits=limits, fallback=fallback),
        mounts=environment_proxy_mounts(limits),
    )


def make_http_client(
    *, limits: httpx.Limits, transport: Literal["lean", "httpx"] = "lean"
) -> httpx.AsyncClient:
    """The SDK's shared client: :func:`lean_client`, or a plain ``httpx.AsyncClient``.

    Args:
        limits: Connection limits for whichever transport is used.
        transport: ``"lean"`` (default): :func:`lean_client`; ``"httpx"``: httpx's own
            transport. The SDK takes it from ``SOORMA_HTTP_TRANSPORT`` through
            :class:`soorma.settings.PlatformSettings`. Proxies come from the
            environment either way, as httpx reads them.
    """
    if transport == "httpx":
        return httpx.AsyncClient(limits=limits, verify=verified_tls())
    if transport != "lean":
        raise ValueError(f"transport must be 'lean' or 'httpx', not {transport!r}")
    return lean_client(limits=limits)


__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "LeanTransport",
    "environment_proxy_mounts",
    "lean_client",
    "make_http_client",
    "read_response",
    "verified_tls",
]
