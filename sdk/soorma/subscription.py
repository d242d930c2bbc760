"""A live SSE subscription to the event service, as an async iterator of events."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from soorma import _tracing
from soorma._sse import DEFAULT_HEARTBEAT_TIMEOUT, DEFAULT_MAX_BACKOFF, stream_frames
from soorma.event import Event
from soorma_common import tracing as otel
from soorma_common.errors import ServiceUnavailable

logger = logging.getLogger("soorma.subscription")

DEFAULT_BUFFER = 64
STREAM_PATH = "/v1/events/stream"


class _Closed:
    pass


_CLOSED = _Closed()


class Subscription:
    """Events from one SSE stream of the event service.

    Created by :meth:`soorma.bus.BusClient.subscribe`. Use it as an async context
    manager and iterate it::

        async with bus.subscribe(["business-facts"], event_types=["order.*"]) as sub:
            await sub.wait_ready()
            async for event in sub:
                ...

    A background task reads the stream into a bounded buffer (back-pressure: when the
    consumer is slow, the reader stops reading), reconnects when the connection is lost
    and resumes from the last delivered id (broadcast mode).
    """

    def __init__(
        self,
        *,
        http: httpx.AsyncClient,
        url: str,
        params: Mapping[str, Any],
        headers: Callable[[], Mapping[str, str]],
        last_event_id: str | None = None,
        heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        buffer: int = DEFAULT_BUFFER,
    ) -> None:
        self._http = http
        self._url = url
        self.params = dict(params)
        self._headers = headers
        self._last_event_id = last_event_id
        self._heartbeat_timeout = heartbeat_timeout
        self._max_backoff = max_backoff
        self._queue: asyncio.Queue[Event | BaseException | _Closed] = asyncio.Queue(buffer)
        self._ready = asyncio.Event()
        self._failure: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.connections = 0
        self.last_error: BaseException | None = None
        self._fail_fast = False

    @property
    def last_event_id(self) -> str | None:
        """Resume token of the last event this subscription handed to its consumer."""
        return self._last_event_id

    @property
    def ready(self) -> bool:
        """True once the service confirmed the stream is live (``event: ready``)."""
        return self._ready.is_set()

    def start(self) -> None:
        """Start reading in the background (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._read(), name=f"soorma-sse {self._url}")

    async def wait_ready(
        self,
        timeout: float | None = None,  # noqa: ASYNC109
        *,
        fail_fast: bool = False,
    ) -> None:
        """Wait until the stream is live, so events published from now on are seen.

        Args:
            timeout: Seconds to wait.
            fail_fast: Raise on the first connection refused (one-shot callers such as
                ``call()``) instead of retrying until ``timeout``.

        Raises:
            TimeoutError: not live within ``timeout`` seconds (names the URL and the
                last connection error).
            ServiceUnavailable: (``fail_fast``) the event service refused the
                connection.
            SoormaError: the service refused the stream.
        """
        self._fail_fast = fail_fast
        self.start()
        try:
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        except TimeoutError:
            cause = f" (last error: {self.last_error})" if self.last_error else ""
            raise TimeoutError(
                f"no event stream from the event service at {self._url} within "
                f"{timeout:g} s{cause}; is the platform running and SOORMA_URL right?"
            ) from None
        if self._failure is not None:
            raise self._failure

    def _connection_failed(self, exc: BaseException) -> None:
        self.last_error = exc
        if self._fail_fast and not self._ready.is_set() and isinstance(exc, httpx.ConnectError):
            # Ends the stream (``_read`` hands it to ``wait_ready``), without a retry.
            raise ServiceUnavailable(
                f"cannot reach the event service at {self._url} ({exc}); is the platform "
                "running and SOORMA_URL right?",
                details={"url": self._url},
            ) from exc

    async def _read(self) -> None:
        try:
            async for frame in stream_frames(
                self._http,
                self._url,
                params=self.params,
                headers=self._headers,
                last_event_id=self._last_event_id,
                heartbeat_timeout=self._heartbeat_timeout,
                max_backoff=self._max_backoff,
                on_error=self._connection_failed,
            ):
                if frame.event == "ready":
                    self.connections += 1
                    self._ready.set()
                elif frame.event == "message":
                    try:
                        event = Event.from_delivery(frame.data, frame.id)
                    except ValueError:
                        logger.warning("dropping undecodable SSE frame id=%s", frame.id)
                        continue
                    if otel.ENABLED:
                        _tracing.delivered(event, frame.id)
                    await self._queue.put(event)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._failure = exc
            self._ready.set()
            await self._queue.put(exc)

    def __aiter__(self) -> Subscription:
        self.start()
        return self

    async def __anext__(self) -> Event:
        if self._closed:
            raise StopAsyncIteration
        item = await self._queue.get()
        if isinstance(item, _Closed):
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            raise item
        # Advanced only when handed over, so resuming from it never skips a buffered event.
        self._last_event_id = item.delivery_id or self._last_event_id
        return item

    def take(self, limit: int) -> list[Event]:
        """Up to ``limit`` events already buffered, without waiting (batch consumers:
        ``first = await anext(sub)`` then ``sub.take(n)``). Stops before a stream error,
        which the next ``anext`` raises."""
        taken: list[Event] = []
        while len(taken) < limit and not self._closed:
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if not isinstance(item, Event):
                # Put the error or the end back in front for ``__anext__``.
                rest: list[Event | BaseException | _Closed] = [item]
                while not self._queue.empty():
                    rest.append(self._queue.get_nowait())
                for r in rest:
                    self._queue.put_nowait(r)
                break
            self._last_event_id = item.delivery_id or self._last_event_id
            taken.append(item)
        return taken

    async def close(self) -> None:
        """Stop reading and drop the connection. Buffered events are discarded."""
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        # Wake a consumer blocked in __anext__.
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(_CLOSED)

    async def __aenter__(self) -> Subscription:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def stream_params(
    *,
    topics: Sequence[str],
    event_types: Sequence[str] | None,
    group: str | None,
    consumer: str | None,
    start_from: str | None,
    visibility_timeout: float | None,
    max_deliveries: int | None,
    prefetch: int | None = None,
    count_started: bool = False,
) -> dict[str, Any]:
    """Query parameters of ``GET /v1/events/stream``."""
    params: dict[str, Any] = {"topics": ",".join(topics)}
    if event_types:
        params["event_types"] = ",".join(event_types)
    if group:
        params["group"] = group
    if consumer:
        params["consumer"] = consumer
    if start_from:
        params["from"] = start_from
    if visibility_timeout is not None:
        params["visibility_timeout"] = visibility_timeout
    if max_deliveries is not None:
        params["max_deliveries"] = max_deliveries
    if prefetch is not None:
        params["prefetch"] = prefetch
    if count_started:
        params["count_deliveries"] = "started"
    return params


__all__ = ["Subscription", "stream_params"]
