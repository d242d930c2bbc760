"""The SDK's lean HTTP/1.1 transport against real servers.

Well-behaved cases run against real uvicorn; the failures uvicorn does not produce on
demand (a keep-alive socket closed under the client, a response cut short, a server that
never answers) come from a tiny scripted asyncio TCP server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from soorma import ConfigurationError, PlatformContext, PlatformSettings
from soorma._transport import LeanTransport, make_http_client
from testsupport.server import serve

pytestmark = pytest.mark.asyncio

LIMITS = httpx.Limits(max_connections=16, max_keepalive_connections=8)


def echo_app() -> Starlette:
    async def peer(request: Request) -> Response:
        assert request.client is not None
        return JSONResponse({"port": request.client.port, "n": request.query_params.get("n")})

    async def echo(request: Request) -> Response:
        return Response(await request.body(), media_type="application/json")

    async def chunked(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            for i in range(5):
                yield f"part{i};".encode()

        return StreamingResponse(body(), media_type="text/plain")

    async def big(request: Request) -> Response:
        return Response(b"z" * 3_000_000, media_type="application/octet-stream")

    async def closing(request: Request) -> Response:
        return JSONResponse({"ok": True}, headers={"Connection": "close"})

    async def empty(request: Request) -> Response:
        return Response(status_code=204)

    async def sse(request: Request) -> Response:
        async def body() -> AsyncIterator[str]:
            yield "event: ready\ndata: {}\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/peer", peer),
            Route("/echo", echo, methods=["POST", "PUT"]),
            Route("/chunked", chunked),
            Route("/big", big),
            Route("/closing", closing),
            Route("/empty", empty, methods=["DELETE"]),
            Route("/sse", sse),
        ]
    )


@asynccontextmanager
async def lean_client(**kwargs: object) -> AsyncIterator[tuple[httpx.AsyncClient, LeanTransport]]:
    transport = LeanTransport(limits=LIMITS, **kwargs)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport) as client:
        yield client, transport


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def scripted_server(handler: Handler) -> AsyncIterator[str]:
    """A raw TCP server on a free loopback port running ``handler`` per connection."""
    tasks: set[asyncio.Task[None]] = set()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return await reader.readexactly(length) if length else b""


def ok(body: bytes = b'{"ok":true}') -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 5 s")


async def test_sequential_requests_reuse_one_keep_alive_connection() -> None:
    async with serve(echo_app()) as srv, lean_client() as (client, transport):
        ports = {
            (await client.get(f"{srv.url}/peer", params={"n": i})).json()["port"] for i in range(5)
        }
        assert len(ports) == 1
        assert transport.idle_connections() == 1


async def test_query_strings_and_json_bodies_arrive_intact() -> None:
    async with serve(echo_app()) as srv, lean_client() as (client, _):
        assert (await client.get(f"{srv.url}/peer", params={"n": "a b&c"})).json()["n"] == "a b&c"
        body = {"text": "héllo ✓", "items": list(range(10))}
        response = await client.post(f"{srv.url}/echo", json=body)
        assert response.status_code == 200
        assert response.json() == body
        assert response.http_version == "HTTP/1.1"


async def test_chunked_response_is_reassembled_and_connection_reused() -> None:
    async with serve(echo_app()) as srv, lean_client() as (client, transport):
        first = await client.get(f"{srv.url}/chunked")
        assert first.headers.get("transfer-encoding") == "chunked"
        assert first.text == "part0;part1;part2;part3;part4;"
        assert (await client.get(f"{srv.url}/chunked")).text == first.text
        assert transport.idle_connections() == 1


async def test_large_request_and_response_bodies_round_trip() -> None:
    async with serve(echo_app()) as srv, lean_client() as (client, _):
        payload = {"blob": "x" * 2_000_000}
        echoed = await client.put(f"{srv.url}/echo", json=payload)
        assert echoed.json() == payload
        assert len((await client.get(f"{srv.url}/big")).content) == 3_000_000


async def test_concurrent_requests_each_get_their_own_answer() -> None:
    async with serve(echo_app()) as srv, lean_client() as (client, transport):
        responses = await asyncio.gather(
            *(client.post(f"{srv.url}/echo", json={"i": i}) for i in range(40))
        )
        assert [r.json()["i"] for r in responses] == list(range(40))
        assert 1 <= transport.idle_connections() <= LIMITS.max_keepalive_connections


async def test_connection_close_and_no_content_responses_are_honoured() -> None:
    async with serve(echo_app()) as srv, lean_client() as (client, transport):
        assert (await client.get(f"{srv.url}/closing")).json() == {"ok": True}
        assert transport.idle_connections() == 0
        deleted = await client.delete(f"{srv.url}/empty")
        assert deleted.status_code == 204 and deleted.content == b""
        assert transport.idle_connections() == 1


async def test_event_streams_go_to_the_default_transport() -> None:
    used: list[str] = []

    class Recording(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            used.append(request.url.path)
            return await super().handle_async_request(request)

    async with serve(echo_app()) as srv, lean_client(fallback=Recording()) as (client, _):
        async with client.stream(
            "GET", f"{srv.url}/sse", headers={"Accept": "text/event-stream"}
        ) as response:
            lines = [line async for line in response.aiter_lines()]
        assert lines[0] == "event: ready"
        await client.get(f"{srv.url}/peer")
        assert used == ["/sse"]


async def test_keep_alive_socket_closed_by_server_is_replaced_transparently() -> None:
    connections = 0

    async def one_answer_then_close(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(ok())  # keep-alive by HTTP/1.1 default, then closed anyway

    async with scripted_server(one_answer_then_close) as url, lean_client() as (client, tr):
        assert (await client.get(url)).json() == {"ok": True}
        await until(lambda: tr.idle_connections() == 0)  # the client saw the close
        assert (await client.post(url, json={"a": 1})).json() == {"ok": True}
        assert (await client.get(url)).json() == {"ok": True}
        assert connections == 3


async def test_idempotent_request_is_retried_once_when_stale_socket_drops_it() -> None:
    requests_seen = 0
    first_done = asyncio.Event()
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests_seen
        await read_request(reader)
        requests_seen += 1
        writer.write(ok())
        if requests_seen == 1:
            # Hold the first socket open (the client pools it), then drop the next
            # request on it without an answer: a keep-alive race the client cannot see.
            first_done.set()
            await read_request(reader)
            requests_seen += 1
            release.set()

    async with scripted_server(handler) as url, lean_client() as (client, _):
        await client.get(url)
        await first_done.wait()
        assert (await client.get(url)).json() == {"ok": True}
        assert release.is_set() and requests_seen == 3


async def test_post_dropped_on_reused_socket_is_not_resent() -> None:
    posts = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal posts
        await read_request(reader)
        writer.write(ok())
        await read_request(reader)
        posts += 1  # the second request is read, then the socket closes unanswered

    async with scripted_server(handler) as url, lean_client() as (client, _):
        await client.get(url)
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(url, json={"a": 1})
        assert posts == 1


async def test_server_closing_mid_response_raises_instead_of_hanging() -> None:
    async def half_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 10)
        await writer.drain()

    async def half_head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Le")
        await writer.drain()

    for handler in (half_body, half_head):
        async with scripted_server(handler) as url, lean_client() as (client, _):
            with pytest.raises(httpx.RemoteProtocolError):
                await client.get(url, timeout=5)


async def test_silent_server_raises_read_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.Event().wait()

    async with scripted_server(silent) as url, lean_client() as (client, transport):
        with pytest.raises(httpx.ReadTimeout):
            await client.get(url, timeout=httpx.Timeout(5.0, read=0.2))
        assert transport.idle_connections() == 0


async def test_refused_connection_raises_connect_error() -> None:
    async with scripted_server(read_request) as url:  # type: ignore[arg-type]
        pass  # closed: nothing listens on the port any more
    async with lean_client() as (client, _):
        with pytest.raises(httpx.ConnectError):
            await client.get(url)


async def test_platform_context_uses_lean_transport_unless_env_opts_out() -> None:
    async with PlatformContext.from_env(environ={}) as context:
        assert isinstance(context.http._transport, LeanTransport)
    async with PlatformContext.from_env(environ={"SOORMA_HTTP_TRANSPORT": "httpx"}) as context:
        assert isinstance(context.http._transport, httpx.AsyncHTTPTransport)
    settings = PlatformSettings(http_transport="httpx")
    async with PlatformContext.from_env(settings=settings) as context:
        assert isinstance(context.http._transport, httpx.AsyncHTTPTransport)
    with pytest.raises(ConfigurationError, match="SOORMA_HTTP_TRANSPORT"):
        PlatformSettings.from_env({"SOORMA_HTTP_TRANSPORT": "curl"})
    with pytest.raises(ValueError, match="transport must be 'lean' or 'httpx'"):
        make_http_client(limits=LIMITS, transport="curl")  # type: ignore[arg-type]


async def test_sdk_client_round_trips_json_through_lean_transport() -> None:
    async with serve(echo_app()) as srv:
        client = make_http_client(limits=LIMITS)
        async with client:
            body = {"nested": {"k": [1, 2, 3]}, "s": json.dumps({"x": 1})}
            assert (await client.post(f"{srv.url}/echo", json=body)).json() == body
