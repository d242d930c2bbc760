"""A small Server-Sent Events client over httpx streaming.

Parses ``event``/``id``/``data`` frames, remembers the last id, reconnects with
``Last-Event-ID`` and exponential backoff, and treats a silent connection (no bytes,
not even a heartbeat, for ``heartbeat_timeout`` seconds) as dead.

Lines end at LF, CRLF or CR only, as the SSE format defines them. (httpx's
``aiter_lines()`` also ends lines at U+2028, U+2029, U+0085 …, which JSON carries
unescaped inside strings: an event holding one was cut apart.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from soorma._http import raise_for_error
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


@dataclass(slots=True)
class SSEParser:
    """Incremental parser for the ``text/event-stream`` format (line at a time)."""

    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str | None = None
    _has_fields: bool = False

    def feed(self, line: str) -> SSEFrame | None:
        """Feed one line (without its newline); return a frame on a blank line."""
        if line == "":
            if not self._has_fields:
                return None
            frame = SSEFrame(
                event=self._event or "message", data="\n".join(self._data), id=self._id
            )
            self._event, self._data, self._id, self._has_fields = "", [], None, False
            return frame
        if line.startswith(":"):
            return None  # comment / keep-alive
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name != "retry":
            return None
        self._has_fields = True
        return None


class SSELineSplitter:
    """Splits a byte stream into SSE lines: at LF, CRLF or CR, and nowhere else.

    Splitting happens on bytes, so a multi-byte UTF-8 character is never cut; a CR at
    the end of one chunk and an LF at the start of the next are one line end.
    """

    __slots__ = ("_rest", "_skip_lf")

    def __init__(self) -> None:
        self._rest = b""
        self._skip_lf = False

    def feed(self, chunk: bytes) -> list[str]:
        """The complete lines ``chunk`` finishes (without their line ends)."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                if not chunk:
                    return []
        data = self._rest + chunk if self._rest else chunk
        if b"\r" in data:
            self._skip_lf = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, self._rest = data.split(b"\n")
        return [line.decode("utf-8", "replace") for line in lines]


class SSEConnectionLost(Exception):
    """The stream ended or went silent; the caller may reconnect."""


async def _frames(response: httpx.Response, heartbeat_timeout: float) -> AsyncIterator[SSEFrame]:
    parser = SSEParser()
    splitter = SSELineSplitter()
    chunks = response.aiter_bytes()
    while True:
        try:
            async with asyncio.timeout(heartbeat_timeout):
                chunk = await anext(chunks)
        except StopAsyncIteration:
            raise SSEConnectionLost("stream closed by the server") from None
        except TimeoutError:
            raise SSEConnectionLost(f"no data or heartbeat for {heartbeat_timeout:.0f} s") from None
        for line in splitter.feed(chunk):
            frame = parser.feed(line)
            if frame is not None:
                yield frame


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

    Raises:
        SoormaError: the service refused the stream with a non-retryable 4xx.
    """
    last_id = last_event_id
    backoff = min_backoff
    # Until a stream has ever answered, a failure most likely means the platform is not
    # running or the URL is wrong: say so at WARNING, since default logging hides INFO.
    ever_connected = False
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
            if not reconnect:
                raise SSEConnectionLost(str(exc)) from exc
            if ever_connected:
                logger.info("SSE stream %s lost (%s); reconnecting in %.1f s", url, exc, backoff)
            else:
                logger.warning(
                    "cannot open SSE stream %s (%s); retrying in %.1f s - is the event service "
                    "running (./scripts/dev.sh) and SOORMA_EVENT_SERVICE_URL right?",
                    url,
                    exc,
                    backoff,
                )
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, max_backoff)
