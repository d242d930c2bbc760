"""Run an ASGI app under real uvicorn on a free loopback port, inside the test's loop."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# How often a stopping server looks again whether its connections and tasks are done.
SHUTDOWN_POLL_SECONDS = 0.005


class _Server(uvicorn.Server):
    """uvicorn's server, which stops as soon as :meth:`LiveServer.stop` asks and is done.

    uvicorn looks at ``should_exit`` once every tenth of a second, and its shutdown sleeps
    a tenth of a second after asking the connections to close, then looks every tenth of
    a second whether they and the request tasks are gone. The suite stops well over a
    thousand servers, so a stop wakes the loop at once and the shutdown looks every few
    milliseconds instead. Everything else (the once-a-second tick, the graceful shutdown's
    steps and its timeout, the lifespan) is uvicorn's own.
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
        try:
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                await self._connections_and_tasks_done()
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _connections_and_tasks_done(self) -> None:
        # uvicorn keeps plain sets of its connections and tasks, with no event to wait on.
        while self.server_state.connections and not self.force_exit:  # noqa: ASYNC110
            await asyncio.sleep(SHUTDOWN_POLL_SECONDS)
        while self.server_state.tasks and not self.force_exit:  # noqa: ASYNC110
            await asyncio.sleep(SHUTDOWN_POLL_SECONDS)
        for server in self.servers:
            await server.wait_closed()


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
