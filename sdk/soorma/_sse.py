"""Server-Sent Events with reconnection, on top of httpx-sse's parser.

httpx-sse parses the ``text/event-stream`` format (lines end at LF, CRLF or CR only, as
the format defines them: httpx's own ``aiter_lines()`` also ends lines at U+2028, U+2029,
U+0085 …, which JSON carries unescaped inside strings). This module adds what a long-lived
subscription needs: it remembers the last id, reconnects with ``Last-Event-ID`` and
exponential backoff, and treats a silent connection (no bytes, not even a heartbeat, for
``heartbeat_timeout`` seconds) as dead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import httpx
from httpx_sse import EventSource, SSEError

from soorma.client import raise_for_error
from soorma_common.errors import SoormaError

logger = logging.getLogger("soorma.sse")

DEFAULT_HEARTBEAT_TIMEOUT = 45.0  # three missed 15 s heartbeats
DEFAULT_MIN_BACKOFF = 0.1
DEFAULT_MAX_BACKOFF = 5.0

# Client errors that will not fix themselves by reconnecting (bad query, bad token...).
_RETRYABLE_STATUS = {408, 425, 429}


@dataclass(slots=True)
class SSEFrame:
    """One dispatched SSE frame."""

    event: str = "message"
    data: str = ""
    id: str | None = None


class SSEConnectionLost(Exception):
    """The stream ended or went silent; the caller may reconnect."""


class _Watched:
    """The response as httpx-sse reads it, with a deadline on every chunk received.

    The deadline covers only the wait for the next chunk, never the consumer's handling
    of a frame (an async generator runs in its consumer's task).
    """

    def __init__(self, response: httpx.Response, heartbeat_timeout: float) -> None:
        self.headers = response.headers
        self._response = response
        self._timeout = heartbeat_timeout

    async def aiter_text(self) -> AsyncIterator[str]:
        chunks = self._response.aiter_text()
        while True:
            try:
                async with asyncio.timeout(self._timeout):
                    text = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise SSEConnectionLost(f"no data or heartbeat for {self._timeout:.0f} s") from None
            yield text


async def _frames(response: httpx.Response, heartbeat_timeout: float) -> AsyncIterator[SSEFrame]:
    # EventSource reads only ``headers`` and ``aiter_text()`` of what it is given.
    source = EventSource(cast(httpx.Response, _Watched(response, heartbeat_timeout)))
    try:
        async for sse in source.aiter_sse():
            if sse.event == "message" and not sse.data:
                # A blank line after a bare comment once an id was seen: nothing to deliver.
                continue
            yield SSEFrame(event=sse.event, data=sse.data, id=sse.id or None)
    except SSEError as exc:  # not an event stream (e.g. a proxy's error page)
        raise SSEConnectionLost(str(exc)) from None
    raise SSEConnectionLost("stream closed by the server")


async def stream_frames(
    http: httpx.AsyncClient,
    url: str,
    *,
    params: Mapping[str, Any] | None = None,
    headers: Callable[[], Mapping[str, str]] | None = None,
    last_event_id: str | None = None,
    heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
    min_backoff: float = DEFAULT_MIN_BACKOFF,
    max_backoff: float = DEFAULT_MAX_BACKOFF,
    reconnect: bool = True,
    on_error: Callable[[BaseException], None] | None = None,
) -> AsyncIterator[SSEFrame]:
    """Yield frames from ``url``, reconnecting until the consumer stops iterating.

    Args:
        http: Client to stream with.
        url: Stream URL.
        params: Query parameters.
        headers: Called before each (re)connect, so identity headers stay current.
        last_event_id: Resume point for the first connection.
        heartbeat_timeout: Seconds of silence after which the connection is dropped.
        min_backoff: First reconnect delay; doubles up to ``max_backoff``.
        max_backoff: Longest reconnect delay.
        reconnect: ``False`` to raise on the first disconnect instead.
        on_error: Called with each failed connection (or lost stream) before retrying;
            what it raises ends the stream.

    Raises:
        SoormaError: the service refused the stream with a non-retryable 4xx.
    """
    last_id = last_event_id
    backoff = min_backoff
    # Until a stream has ever answered, a failure most likely means the platform is not
    # running or the URL is wrong: say so at WARNING, since default logging hides INFO.
    ever_connected = False
    # When the stream was lost (or first failed to open): its return is logged too.
    failed_since: float | None = None
    while True:
        request_headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if headers is not None:
            request_headers.update(headers())
        if last_id:
            request_headers["Last-Event-ID"] = last_id
        try:
            timeout = httpx.Timeout(10.0, read=None)
            async with http.stream(
                "GET", url, params=params, headers=request_headers, timeout=timeout
            ) as response:
                if not response.is_success:
                    await response.aread()
                    status = response.status_code
                    if 400 <= status < 500 and status not in _RETRYABLE_STATUS:
                        raise_for_error(response)
                    raise SSEConnectionLost(f"stream answered HTTP {status}")
                if failed_since is not None:
                    away = time.monotonic() - failed_since
                    if ever_connected:
                        logger.info("SSE stream %s reconnected after %.1f s", url, away)
                    else:
                        logger.warning("SSE stream %s open after %.1f s of retries", url, away)
                    failed_since = None
                ever_connected = True
                async for frame in _frames(response, heartbeat_timeout):
                    if frame.id is not None:
                        last_id = frame.id
                    # Only a live stream resets the backoff; a flapping server keeps it.
                    backoff = min_backoff
                    yield frame
        except SoormaError:
            raise
        except (SSEConnectionLost, httpx.TransportError) as exc:
            if on_error is not None:
                on_error(exc)
            if failed_since is None:
                failed_since = time.monotonic()
            if not reconnect:
                raise SSEConnectionLost(str(exc)) from exc
            if ever_connected:
                logger.info("SSE stream %s lost (%s); reconnecting in %.1f s", url, exc, backoff)
            else:
                logger.warning(
                    "cannot open SSE stream %s (%s); retrying in %.1f s - is the event service "
                    "running (./scripts/dev.sh) and SOORMA_URL right?",
                    url,
                    exc,
                    backoff,
                )
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, max_backoff)
