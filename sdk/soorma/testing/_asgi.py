"""An httpx transport that runs ASGI apps in process and *streams* their responses.

``httpx.ASGITransport`` waits for the whole response body before returning it, so an
endless response (an SSE event stream) never returns. This transport hands the response
back as soon as the app sent its status line and passes each body chunk on as the app
sends it; closing the response tells the app the client went away (``http.disconnect``).

Apps are chosen by the request's host (``http://events.soorma.test/...``); an unknown
host fails like a closed port (``httpx.ConnectError``), so the SDK reports the service as
unreachable exactly as it would over the network. :class:`Lifespan` runs an app's
lifespan once; its state is copied into every request's scope, as ASGI servers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import httpx

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]
# Called once a response is complete: (request, status, request body, response body).
ExchangeHook = Callable[[httpx.Request, int, bytes, bytes], None]

# How long a closed streaming response may take to end on its own before it is cancelled.
DISCONNECT_GRACE_SECONDS = 0.5
_ASGI = {"version": "3.0", "spec_version": "2.3"}
_END = object()
_FAILED = object()


class Lifespan:
    """Runs an ASGI app's lifespan protocol: ``await start()`` ... ``await stop()``.

    Args:
        app: The ASGI application.
        name: Used in error messages.
    """

    def __init__(self, app: ASGIApp, *, name: str) -> None:
        self.app = app
        self.name = name
        self.state: dict[str, Any] = {}
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._outbox: asyncio.Queue[Message] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> dict[str, Any]:
        """Send ``lifespan.startup`` and wait until the app is ready; its state."""
        scope: dict[str, Any] = {"type": "lifespan", "asgi": _ASGI, "state": self.state}

        async def receive() -> Message:
            return await self._inbox.get()

        async def send(message: Message) -> None:
            await self._outbox.put(message)

        async def run() -> None:
            await self.app(scope, receive, send)

        self._task = asyncio.create_task(
            run(),
            name=f"{self.name} lifespan",
            context=contextvars.Context(),
        )
        await self._inbox.put({"type": "lifespan.startup"})
        try:
            await self._expect("lifespan.startup", "start")
        except BaseException:
            task, self._task = self._task, None
            task.cancel()
            await asyncio.wait({task})
            raise
        return self.state

    async def stop(self) -> None:
        """Send ``lifespan.shutdown`` and wait until the app released its resources."""
        if self._task is None:
            return
        try:
            if not self._task.done():
                await self._inbox.put({"type": "lifespan.shutdown"})
                await self._expect("lifespan.shutdown", "stop")
        finally:
            task, self._task = self._task, None
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
            if not task.cancelled() and task.exception() is not None:
                raise RuntimeError(f"{self.name} failed to stop") from task.exception()

    async def _expect(self, phase: str, verb: str) -> None:
        assert self._task is not None
        getter = asyncio.ensure_future(self._outbox.get())
        done, _ = await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if getter not in done:
            getter.cancel()
            self._task.result()  # re-raises what the lifespan raised
            raise RuntimeError(f"{self.name} failed to {verb}: its lifespan ended early")
        message = getter.result()
        if message["type"] == f"{phase}.failed":
            raise RuntimeError(f"{self.name} failed to {verb}: {message.get('message', '')}")
        if message["type"] != f"{phase}.complete":
            raise RuntimeError(f"{self.name}: unexpected {message['type']!r} during {phase}")


class _Exchange:
    """One request/response between the client and an app task."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.status = 500
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: asyncio.Queue[object] = asyncio.Queue()
        self.disconnected = asyncio.Event()
        self.body_sent = False
        self.finished = asyncio.Event()
        self.body = bytearray()
        self.keep_body = False

    async def send(self, message: Message) -> None:
        if self.disconnected.is_set():
            return
        kind = message["type"]
        if kind == "http.response.start":
            self.status = int(message["status"])
            self.headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
            self.started.set()
        elif kind == "http.response.body":
            chunk = bytes(message.get("body", b""))
            if self.keep_body:
                self.body += chunk
            if chunk:
                await self.chunks.put(chunk)
            if not message.get("more_body", False):
                self.body_sent = True
                self.finished.set()
                await self.chunks.put(_END)


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(
        self, exchange: _Exchange, task: asyncio.Task[None], read_timeout: float | None
    ) -> None:
        self._exchange = exchange
        self._task = task
        self._read_timeout = read_timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            getter = asyncio.ensure_future(self._exchange.chunks.get())
            done, _ = await asyncio.wait(
                {getter, self._task},
                timeout=self._read_timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if getter in done:
                item = getter.result()
            elif not self._exchange.chunks.empty():
                getter.cancel()
                item = self._exchange.chunks.get_nowait()
            elif not done:
                getter.cancel()
                raise httpx.ReadTimeout(f"no data for {self._read_timeout:g} s")
            else:
                getter.cancel()
                if self._task.cancelled() or self._task.exception() is not None:
                    raise httpx.ReadError("the app failed while sending the response")
                return  # the app returned without ending the body: treat as the end
            if item is _END:
                return
            if item is _FAILED:
                raise httpx.ReadError("the app failed while sending the response")
            assert isinstance(item, bytes)
            yield item

    async def aclose(self) -> None:
        self._exchange.disconnected.set()
        if self._task.done():
            return
        # asyncio.wait neither raises the app's error nor swallows our own cancellation.
        await asyncio.wait({self._task}, timeout=DISCONNECT_GRACE_SECONDS)
        if not self._task.done():
            self._task.cancel()
            await asyncio.wait({self._task})


class StreamingASGITransport(httpx.AsyncBaseTransport):
    """Sends each request to the in-process app registered for its host.

    Args:
        apps: Host name -> ASGI app (``{"events.soorma.test": app}``).
        states: Host name -> the app's lifespan state (copied into each request).
        on_exchange: Called with every finished exchange on the paths in ``watch``.
        watch: ``(host, method, path)`` triples whose bodies ``on_exchange`` receives.
    """

    def __init__(
        self,
        apps: Mapping[str, ASGIApp],
        *,
        states: Mapping[str, Mapping[str, Any]] | None = None,
        on_exchange: ExchangeHook | None = None,
        watch: frozenset[tuple[str, str, str]] = frozenset(),
    ) -> None:
        self.apps = dict(apps)
        self.states = {host: dict(state) for host, state in (states or {}).items()}
        self.on_exchange = on_exchange
        self.watch = watch
        self._tasks: set[asyncio.Task[None]] = set()
        # Requests the apps have not started answering yet (see quiet()).
        self._unanswered = 0
        self._answered: asyncio.Event | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        app = self.apps.get(host)
        if app is None:
            raise httpx.ConnectError(f"no in-process service at {host!r}", request=request)
        body = await request.aread()
        exchange = _Exchange()
        watched = (host, request.method, request.url.path) in self.watch
        exchange.keep_body = watched and self.on_exchange is not None
        delivered = False

        async def receive() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await exchange.disconnected.wait()
            return {"type": "http.disconnect"}

        scope = self._scope(request, host)
        task = asyncio.create_task(
            self._run(app, scope, receive, exchange),
            name=f"{host} {request.url.path}",
            context=contextvars.Context(),  # a server shares no context with its client
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # httpx's read timeout bounds each wait for data, as on a socket.
        read_timeout = (request.extensions.get("timeout") or {}).get("read")
        starter = asyncio.ensure_future(exchange.started.wait())
        self._unanswered += 1
        try:
            done, _ = await asyncio.wait(
                {starter, task}, timeout=read_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            self._unanswered -= 1
            if self._answered is not None:
                self._answered.set()
        if not exchange.started.is_set():
            starter.cancel()
            if not done:
                exchange.disconnected.set()
                task.cancel()
                raise httpx.ReadTimeout(f"no response within {read_timeout:g} s", request=request)
            task.result()  # the app raised before answering: surface its error
            raise httpx.RemoteProtocolError("the app returned without a response", request=request)
        if exchange.keep_body:
            await self._report_when_done(request, body, exchange, task)
        return httpx.Response(
            exchange.status,
            headers=exchange.headers,
            stream=_ResponseStream(exchange, task, read_timeout),
            request=request,
        )

    async def quiet(self, *, within: float = 5.0, turns: int = 20) -> None:
        """Return once no request is waiting for its answer (an open stream counts as
        answered), after ``turns`` event-loop turns in which none was sent.

        For a test on a manual clock: what a wake-up sent (a database write, a lease
        renewal) is answered before time moves on. Waits at most ``within`` real
        seconds (a request may itself wait for the clock), then returns anyway.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while self._unanswered:
                    answered = self._answered = self._answered or asyncio.Event()
                    answered.clear()
                    await answered.wait()
                    for _ in range(turns):
                        await asyncio.sleep(0)

    async def _report_when_done(
        self, request: httpx.Request, body: bytes, exchange: _Exchange, task: asyncio.Task[None]
    ) -> None:
        # Watched routes answer small JSON bodies: wait for the whole answer, so the hook
        # has run before the caller sees the response.
        finished = asyncio.ensure_future(exchange.finished.wait())
        await asyncio.wait({finished, task}, return_when=asyncio.FIRST_COMPLETED)
        finished.cancel()
        if exchange.body_sent and self.on_exchange is not None:
            self.on_exchange(request, exchange.status, body, bytes(exchange.body))

    @staticmethod
    async def _run(app: ASGIApp, scope: Message, receive: Receive, exchange: _Exchange) -> None:
        try:
            await app(scope, receive, exchange.send)
        except Exception:
            if not exchange.started.is_set():
                raise  # handle_async_request re-raises it to the caller
            await exchange.chunks.put(_FAILED)
        else:
            if exchange.started.is_set() and not exchange.body_sent:
                await exchange.chunks.put(_END)

    def _scope(self, request: httpx.Request, host: str) -> dict[str, Any]:
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        return {
            "type": "http",
            "asgi": _ASGI,
            "http_version": "1.1",
            "method": request.method,
            "scheme": url.scheme,
            "path": url.path,
            "raw_path": url.raw_path.split(b"?", 1)[0],
            "query_string": url.query,
            "root_path": "",
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "client": ("127.0.0.1", 50000),
            "server": (host, port),
            "state": dict(self.states.get(host, {})),
            "extensions": {},
        }

    async def aclose(self) -> None:
        """Cancel requests still running (open streams) and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)


__all__ = ["ASGIApp", "ExchangeHook", "Lifespan", "StreamingASGITransport"]
