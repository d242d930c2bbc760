"""Run an ASGI app under real uvicorn on a free loopback port, inside the test's loop."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import uvicorn

# Test servers' ports come from below the kernel's ephemeral range (32768-60999 on
# Linux), a block per pytest-xdist worker. A port the kernel hands out for ``bind(0)``
# or an outgoing connection was free when picked and could be taken before the server
# bound it: with three workers, ``soorma dev`` once found its gateway port in use.
PORTS_FROM, PORTS_PER_WORKER, WORKER_BLOCKS = 20_000, 1_500, 8
_ports: Iterator[int] | None = None


def _worker_ports() -> Iterator[int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    block = int(worker) % WORKER_BLOCKS if worker.isdigit() else 0
    first = PORTS_FROM + block * PORTS_PER_WORKER
    # A random start: two test runs on one machine rarely walk the same ports together.
    start = random.randrange(PORTS_PER_WORKER)
    ports = [first + (start + i) % PORTS_PER_WORKER for i in range(PORTS_PER_WORKER)]
    return itertools.cycle(ports)


def free_port() -> int:
    """A port for a server about to bind it: the next free one of this worker's block.

    Not for "nothing listens here": the next server started may get it (use
    :func:`closed_port`).
    """
    global _ports
    if _ports is None:
        _ports = _worker_ports()
    for _ in range(PORTS_PER_WORKER):
        port = next(_ports)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # a server of this worker (or something else) holds it
            return port
    raise RuntimeError(f"no free port in {PORTS_PER_WORKER} of this worker's block")


_closed: socket.socket | None = None


def closed_port() -> int:
    """A port on which nothing listens, now or later in this test process.

    The port stays bound (never listening) while the process lives, so connections to it
    are refused and no server of this or another worker can take it over; a port from
    :func:`free_port` used this way was once given to the next test server, and a client
    meant to find nothing reached the wrong service.
    """
    global _closed
    if _closed is None:
        _closed = socket.socket()
        _closed.bind(("127.0.0.1", 0))
    return int(_closed.getsockname()[1])


# How often a stopping server looks whether its connections and requests are gone.
SHUTDOWN_POLL_SECONDS = 0.005


class _Server(uvicorn.Server):
    """uvicorn's server, which stops as soon as :meth:`LiveServer.stop` asks and as soon as
    its connections are gone.

    uvicorn looks at ``should_exit`` once every tenth of a second, and its shutdown gives
    the connections a fixed tenth of a second to close before it looks at them; the suite
    stops well over a thousand servers, so a stop wakes the loop at once and the shutdown
    ends when the last connection and request did. The rest (the once-a-second tick, the
    graceful timeout, the lifespan) is uvicorn's own.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stop_requested = asyncio.Event()

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1):
                    await self.stop_requested.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        state = self.server_state
        try:
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                # uvicorn signals neither the last connection closing nor the last request
                # ending: look for it.
                while (state.connections or state.tasks) and not self.force_exit:  # noqa: ASYNC110
                    await asyncio.sleep(SHUTDOWN_POLL_SECONDS)
                for server in self.servers:
                    await server.wait_closed()
        except TimeoutError:
            for task in state.tasks:
                task.cancel(msg="graceful shutdown timed out")
        if not self.force_exit:
            await self.lifespan.shutdown()


class LiveServer:
    """A uvicorn server running ``app`` as a task of the current event loop."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.app = app
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=2,
            ws="none",
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve())
        for _ in range(500):
            if self._server.started:
                return
            if self._task.done():
                self._task.result()
                raise RuntimeError("uvicorn exited before starting")
            await asyncio.sleep(0.01)
        raise RuntimeError("uvicorn did not start in 5 s")

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        self._server.stop_requested.set()
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=5)
            except TimeoutError:
                self._server.force_exit = True
                self._task.cancel()
                with contextlib.suppress(Exception):
                    await self._task
        self._server = None
        self._task = None


@contextlib.asynccontextmanager
async def serve(app: Any, port: int | None = None) -> AsyncIterator[LiveServer]:
    """``async with serve(app) as server: ... server.url ...``"""
    server = LiveServer(app, port)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
