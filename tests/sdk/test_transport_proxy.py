"""The SDK's HTTP client honours proxy variables as httpx does; idle sockets stay clean."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest
from test_transport import LIMITS, echo_app, lean_client, ok, read_request, scripted_server

from soorma._transport import (
    LeanTransport,
    environment_proxy_mounts,
    make_http_client,
    verified_tls,
)
from testsupport.server import serve

pytestmark = pytest.mark.asyncio


async def test_http_proxy_from_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n")
        seen.append(head.strip())
        await read_request(reader)
        writer.write(ok(b'{"via":"proxy"}'))
        await writer.drain()

    async with scripted_server(proxy) as proxy_url, serve(echo_app()) as srv:
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        client = make_http_client(limits=LIMITS)
        async with client:
            # Through the proxy, in absolute form, as httpx's own client sends it.
            answer = await client.get("http://soorma-proxied.invalid/x?y=1")
            assert answer.json() == {"via": "proxy"}
            assert seen == [b"GET http://soorma-proxied.invalid/x?y=1 HTTP/1.1"]
            # NO_PROXY exempts a host: that request goes direct, on the lean transport.
            monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        async with make_http_client(limits=LIMITS) as client:
            assert isinstance(client._transport, LeanTransport)
            assert (await client.get(f"{srv.url}/peer")).status_code == 200
            assert client._transport.idle_connections() == 1
            assert len(seen) == 1


async def test_without_proxy_variables_requests_go_direct(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with serve(echo_app()) as srv, make_http_client(limits=LIMITS) as client:
        assert (await client.get(f"{srv.url}/peer")).status_code == 200
        assert isinstance(client._transport, LeanTransport)
        assert client._transport.idle_connections() == 1


async def test_the_client_is_httpx_own_given_the_lean_transport() -> None:
    """No subclass of httpx's client: the lean transport goes in through ``transport=``."""
    async with make_http_client(limits=LIMITS) as client:
        assert type(client) is httpx.AsyncClient
        assert isinstance(client._transport, LeanTransport)


async def test_no_proxy_entries_follow_curls_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("NO_PROXY", "example.com")
    assert environment_proxy_mounts(LIMITS) == {}  # no proxy: nothing to exempt
    monkeypatch.setenv("HTTP_PROXY", "proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", ".example.com, 10.0.0.0/8,::1,localhost,http://a.invalid")
    mounts = environment_proxy_mounts(LIMITS)
    assert isinstance(mounts.pop("http://"), httpx.AsyncHTTPTransport)
    assert mounts == {
        "all://*.example.com": None,
        "all://10.0.0.0/8": None,
        "all://[::1]": None,
        "all://localhost": None,
        "http://a.invalid": None,
    }
    monkeypatch.setenv("NO_PROXY", "localhost,*")
    assert environment_proxy_mounts(LIMITS) == {}


async def test_bytes_arriving_on_an_idle_socket_retire_it() -> None:
    """A server's unsolicited bytes (e.g. a 408 before closing) are never read as the next
    request's response: the socket they arrived on is not reused."""
    connections = 0

    async def answer_then_408(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(ok(b'{"n":%d}' % connections))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        await read_request(reader)  # would answer a second request on this socket
        writer.write(ok(b'{"n":"stale"}'))
        await asyncio.sleep(5)

    async with scripted_server(answer_then_408) as url, lean_client() as (client, tr):
        assert (await client.get(url)).json() == {"n": 1}
        for _ in range(100):
            if tr.idle_connections() == 0:
                break
            await asyncio.sleep(0.01)
        assert tr.idle_connections() == 0
        answer = await client.get(url)
        assert answer.json() == {"n": 2}
        assert connections == 2


async def test_oversized_body_is_a_protocol_error() -> None:
    async def big(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(20):
            writer.write(b"400\r\n" + b"x" * 1024 + b"\r\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async with scripted_server(big) as url, lean_client(max_body_bytes=8192) as (client, _):
        with pytest.raises(httpx.RemoteProtocolError, match="over 8192 bytes"):
            await client.get(url)


async def test_bytes_sent_right_behind_a_response_retire_its_socket() -> None:
    """Extra bytes in the same packet as the response (a second, unasked response) are
    never taken as the answer to the next request."""
    connections = 0

    async def answer_twice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(ok(b'{"n":%d}' % connections) + ok(b'{"n":"smuggled"}'))
        await writer.drain()
        await asyncio.sleep(5)

    async with scripted_server(answer_twice) as url, lean_client() as (client, tr):
        assert (await client.get(url)).json() == {"n": 1}
        assert tr.idle_connections() == 0
        assert (await client.get(url)).json() == {"n": 2}
        assert connections == 2


async def test_clients_share_one_tls_context_and_load_the_ca_bundle_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # httpx loads the CA bundle for every transport it makes (~15-20 ms of CPU each); a
    # process making a client per agent, per CLI call or per test paid it every time.
    loads: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loads.append(args or kwargs)
        load(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # a proxy transport as well
    verified_tls.cache_clear()
    try:
        clients = [make_http_client(limits=LIMITS, transport=t) for t in ("lean", "httpx") * 3]
        for client in clients:
            assert isinstance(client._transport, LeanTransport | httpx.AsyncHTTPTransport)
            await client.aclose()
        assert len(loads) == 1
    finally:
        verified_tls.cache_clear()
