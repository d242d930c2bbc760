"""A small SSE reader over httpx for tests (frames parsed as the spec says)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

import httpx

WAIT = 15.0  # a generous upper bound: failing tests end here, passing ones never wait


@dataclass
class Frame:
    event: str
    id: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


class SSEStream:
    """``async with SSEStream(client, topics=...) as s: await s.messages(3)``."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        headers: dict[str, str] | None = None,
        **params: Any,
    ) -> None:
        self._client = client
        self._headers = headers or {}
        self._params = {k.rstrip("_"): v for k, v in params.items() if v is not None}
        self._frames: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._cm: Any = None
        self._task: asyncio.Task[None] | None = None
        self.response: httpx.Response | None = None
        self.ready: Frame | None = None
        self.heartbeats = 0

    async def __aenter__(self) -> SSEStream:
        self._cm = self._client.stream(
            "GET",
            "/v1/events/stream",
            params=self._params,
            headers=self._headers,
            timeout=httpx.Timeout(WAIT, read=None),
        )
        self.response = await self._cm.__aenter__()
        if self.response.status_code != 200:
            body = await self.response.aread()
            await self._cm.__aexit__(None, None, None)
            raise AssertionError(f"stream failed: {self.response.status_code} {body!r}")
        self._task = asyncio.create_task(self._pump())
        self.ready = await self.next("ready")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Drop the connection (like a client that died)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self._cm is not None:
            with contextlib.suppress(Exception):
                await self._cm.__aexit__(None, None, None)
            self._cm = None

    async def _pump(self) -> None:
        assert self.response is not None
        event, event_id, data = "message", None, []
        try:
            async for line in self.response.aiter_lines():
                if not line:
                    if data:
                        await self._frames.put(Frame(event, event_id, "\n".join(data)))
                    event, event_id, data = "message", None, []
                    continue
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "event":
                    event = value
                elif name == "id":
                    event_id = value
                elif name == "data":
                    data.append(value)
        finally:
            await self._frames.put(None)

    async def next(self, event: str = "message", within: float = WAIT) -> Frame:
        """The next frame of kind ``event`` (other kinds are skipped and counted)."""
        async with asyncio.timeout(within):
            while True:
                frame = await self._frames.get()
                if frame is None:
                    raise AssertionError("stream ended")
                if frame.event == "heartbeat":
                    self.heartbeats += 1
                if frame.event == event:
                    return frame

    async def messages(self, n: int, within: float = WAIT) -> list[Frame]:
        async with asyncio.timeout(within):
            return [await self.next() for _ in range(n)]
