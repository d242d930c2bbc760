"""The lean transport's response parser against h11, on well-formed and malformed input.

The property: whatever the lean parser accepts, h11 accepts too and reads the same way
(status, headers, body, whether the connection may be reused). The lean parser may refuse
more than h11 (a repeated identical ``Content-Length``, ``Content-Length`` beside
``Transfer-Encoding``, obsolete line folding, control characters), never less. Every
well-formed response the generator builds must be accepted.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import h11
import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from soorma._transport import _StaleConnection, read_response

MAX_BODY = 4096


@dataclass(frozen=True)
class Parsed:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    keep_alive: bool


def lean_parse(data: bytes, method: str = "GET") -> Parsed | None:
    """``None`` when the lean parser refuses ``data`` (followed by EOF)."""

    async def run() -> Parsed | None:
        reader = asyncio.StreamReader(limit=64 * 1024)
        reader.feed_data(data)
        reader.feed_eof()
        try:
            status, _, headers, body, keep_alive = await read_response(reader, method, MAX_BODY)
        except (httpx.RemoteProtocolError, _StaleConnection):
            return None
        return Parsed(status, tuple((n.lower(), v) for n, v in headers), body, keep_alive)

    return asyncio.run(run())


def h11_parse(data: bytes, method: str = "GET") -> Parsed | None:
    """``None`` when h11 refuses ``data`` (followed by EOF) as a client would."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=64 * 1024)
    conn.send(h11.Request(method=method, target="/", headers=[("Host", "example")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    eof_sent = False
    response: h11.Response | None = None
    body = b""
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                if eof_sent:
                    return None
                conn.receive_data(b"")
                eof_sent = True
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    return None  # the lean parser's cap: counted as a refusal on both sides
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                return None
    except h11.RemoteProtocolError:
        return None
    assert response is not None
    if response.status_code == 101:
        return None
    # Reusable if h11 says so and the body did not need the peer to close.
    keep_alive = conn.their_state is h11.DONE and not eof_sent
    headers = tuple((n, v) for n, v in response.headers.raw_items())
    return Parsed(response.status_code, tuple((n.lower(), v) for n, v in headers), body, keep_alive)


def same(lean: Parsed, ref: Parsed) -> bool:
    # h11 lower-cases the Transfer-Encoding value it checked; compare values case-blind.
    def norm(p: Parsed) -> Parsed:
        return Parsed(p.status, tuple((n, v.lower()) for n, v in p.headers), p.body, p.keep_alive)

    return norm(lean) == norm(ref)


def check(data: bytes, method: str = "GET", *, must_accept: bool = False) -> None:
    lean = lean_parse(data, method)
    ref = h11_parse(data, method)
    if must_accept:
        assert lean is not None, data
    if lean is not None:
        assert ref is not None, f"lean accepted what h11 refuses: {data!r}"
        assert same(lean, ref), (data, lean, ref)


# -- generated responses ---------------------------------------------------------------

tokens = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
values = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 ;=/", max_size=20).map(str.strip)
bodies = st.binary(max_size=300)


def chunk_encode(body: bytes, sizes: list[int]) -> bytes:
    out, rest = [], body
    for size in sizes:
        if not rest:
            break
        piece, rest = rest[: max(size, 1)], rest[max(size, 1) :]
        out.append(b"%x\r\n%s\r\n" % (len(piece), piece))
    if rest:
        out.append(b"%x\r\n%s\r\n" % (len(rest), rest))
    return b"".join(out) + b"0\r\n\r\n"


@st.composite
def well_formed(draw: st.DrawFn) -> bytes:
    version = draw(st.sampled_from([b"1.1", b"1.0"]))
    status = draw(st.sampled_from([200, 201, 204, 304, 400, 404, 409, 500, 503]))
    headers = [
        (name.encode(), value.encode())
        for name, value in draw(st.lists(st.tuples(tokens, values), max_size=4))
        if name not in ("content-length", "transfer-encoding", "connection")
    ]
    body = draw(bodies) if status not in (204, 304) else b""
    framing = draw(st.sampled_from(["length", "chunked", "close"]))
    if draw(st.booleans()):
        headers.append((b"Connection", draw(st.sampled_from([b"close", b"keep-alive"]))))
    if framing == "length":
        headers.append((b"Content-Length", str(len(body)).encode()))
        payload = body
    elif framing == "chunked":
        headers.append((b"Transfer-Encoding", draw(st.sampled_from([b"chunked", b"Chunked"]))))
        payload = chunk_encode(body, draw(st.lists(st.integers(1, 64), max_size=5)))
    else:
        payload = body
    head = b"HTTP/%s %d Reason\r\n" % (version, status)
    head += b"".join(b"%s: %s\r\n" % header for header in headers)
    return head + b"\r\n" + payload


# Fragments that break framing in the ways smuggling and desync attacks use.
NASTY_HEADERS = [
    b"Content-Length: -1",
    b"Content-Length: +5",
    b"Content-Length: 1_0",
    b"Content-Length: 5, 5",
    b"Content-Length: 5, 6",
    b"Content-Length: 0x5",
    b"Content-Length:  5 ",
    b"Content-Length: 99999999999999999999999",
    b"Content-Length: 5\r\nContent-Length: 5",
    b"Content-Length: 5\r\nContent-Length: 7",
    b"Transfer-Encoding: chunked",
    b"Transfer-Encoding: gzip, chunked",
    b"Transfer-Encoding: chunked, gzip",
    b"Transfer-Encoding: xchunked",
    b"Transfer-Encoding: chunkedx",
    b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
    b"Transfer-Encoding : chunked",
    b"Transfer-Encoding:\tchunked",
    b" Transfer-Encoding: chunked",
    b"X-Folded: a\r\n b",
    b"Connection: xclose",
    b"Connection: keep-alive, close",
    b"Bad Name: x",
    b"NoColon",
    b"X-Ctl: a\x01b",
    b"X-Nul: a\x00b",
]
NASTY_BODIES = [
    b"",
    b"hello",
    b"5\r\nhello\r\n0\r\n\r\n",
    b"5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n",
    b"-5\r\nhello\r\n0\r\n\r\n",
    b"0x5\r\nhello\r\n0\r\n\r\n",
    b"+5\r\nhello\r\n0\r\n\r\n",
    b" 5\r\nhello\r\n0\r\n\r\n",
    b"5\r\nhelloXX0\r\n\r\n",
    b"5\r\nhello\r\n0\r\nBad Trailer\r\n\r\n",
    b"fffffffffffffff\r\nx",
    b"5\r\nhel",
    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
]
STATUS_LINES = [
    b"HTTP/1.1 200 OK",
    b"HTTP/1.1 200",
    b"HTTP/1.0 200 OK",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK",
    b"HTTP/1.1 101 Switching Protocols",
    b"HTTP/1.1 20 OK",
    b"HTTP/1.1 +200 OK",
    b"HTTP/1.1  200 OK",
    b"HTTP/2.0 200 OK",
    b"HTTP/1.1 200 O\x00K",
    b"http/1.1 200 OK",
]


@st.composite
def malformed(draw: st.DrawFn) -> bytes:
    status_line = draw(st.sampled_from(STATUS_LINES))
    headers = draw(st.lists(st.sampled_from(NASTY_HEADERS), max_size=3))
    body = draw(st.sampled_from(NASTY_BODIES))
    data = status_line + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body
    if draw(st.booleans()):
        # Flip, drop or insert a few bytes anywhere.
        for _ in range(draw(st.integers(1, 3))):
            if not data:
                break
            i = draw(st.integers(0, len(data) - 1))
            op = draw(st.sampled_from(["flip", "drop", "insert"]))
            byte = draw(st.sampled_from(list(b"\r\n :;,0-+x\x00\t")))
            if op == "flip":
                data = data[:i] + bytes([byte]) + data[i + 1 :]
            elif op == "drop":
                data = data[:i] + data[i + 1 :]
            else:
                data = data[:i] + bytes([byte]) + data[i:]
    return data


FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(data=well_formed(), method=st.sampled_from(["GET", "POST", "HEAD"]))
def test_well_formed_responses_are_read_as_h11_reads_them(data: bytes, method: str) -> None:
    check(data, method, must_accept=True)


@FUZZ
@given(data=malformed(), method=st.sampled_from(["GET", "HEAD"]))
@example(
    data=b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", method="GET"
)
def test_lean_never_accepts_what_h11_refuses_or_reads_it_differently(
    data: bytes, method: str
) -> None:
    check(data, method)


@FUZZ
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes(data: bytes) -> None:
    check(b"HTTP/1.1 200 OK\r\n" + data)
    check(data)


@pytest.mark.parametrize(
    "header",
    [
        b"Content-Length: -1",
        b"Content-Length: +5",
        b"Content-Length: 1_0",
        b"Content-Length: 5, 5",
        b"Content-Length: 5\r\nContent-Length: 5",
        b"Transfer-Encoding: gzip, chunked",
        b"Transfer-Encoding: xchunked",
        b"Transfer-Encoding: chunked\r\nContent-Length: 5",
    ],
)
def test_ambiguous_framing_is_refused(header: bytes) -> None:
    data = b"HTTP/1.1 200 OK\r\n" + header + b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    assert lean_parse(data) is None


CHUNK = b"400\r\n" + b"x" * 1024 + b"\r\n"


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1) + b"x" * (MAX_BODY + 1),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + CHUNK * 5 + b"0\r\n\r\n",
        b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * (MAX_BODY + 1),
    ],
    ids=["content-length", "chunked", "read-to-close"],
)
def test_bodies_over_the_cap_are_refused(data: bytes) -> None:
    assert lean_parse(data) is None
    assert lean_parse(data, "HEAD") is not None  # the same head without a body is fine
