"""Group commit for single-event appends on Redis.

Every ``POST /v1/events/publish`` appends one event. Sending each as its own ``XADD``
costs a round trip and a full trip through redis-py per event; under concurrent load
most of the server's time went there. Instead, appends that arrive while a write is in
flight wait for it to finish and then go out together in one pipeline: an idle
publisher pays nothing extra (its write goes out at once), a busy one shares round
trips. Writes leave strictly one after another in arrival order, so events of one
tenant and topic keep their publish order; every caller gets its own stream id (or
its own error).
"""

from __future__ import annotations

import asyncio
import contextlib

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

# Upper bound on one pipeline: keeps a single write (and its reply) small.
MAX_COALESCED = 512


class AppendCoalescer:
    """Coalesces concurrent single ``XADD`` calls into pipelined round trips."""

    def __init__(self, *, redis: Redis, max_length: int) -> None:
        self._r = redis
        self._max_length = max_length
        self._queue: list[tuple[str, bytes, str, asyncio.Future[bytes]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def xadd(self, key: str, payload: bytes, event_type: str) -> bytes:
        """Append one entry (fields ``e`` and ``y``) to ``key``; returns its stream id."""
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._queue.append((key, payload, event_type, future))
        if self._writer is None:
            # A task, not the caller, does the writing: a caller that goes away (client
            # disconnect cancels its request) must not strand the others' writes.
            self._writer = asyncio.create_task(self._write_all(), name="redis-appends")
        return await future

    async def _write_all(self) -> None:
        try:
            while self._queue:
                batch = self._queue[:MAX_COALESCED]
                del self._queue[:MAX_COALESCED]
                await self._write(batch)
        finally:
            self._writer = None
            # Cancelled mid-write (shutdown): nobody may wait forever.
            for *_, future in self._queue:
                if not future.done():
                    future.set_exception(RedisConnectionError("event log closed"))
            self._queue.clear()

    async def _write(self, batch: list[tuple[str, bytes, str, asyncio.Future[bytes]]]) -> None:
        results: list[object]
        try:
            if len(batch) == 1:
                key, payload, event_type, _ = batch[0]
                results = [await self._r.xadd(
                    key, {b"e": payload, b"y": event_type},
                    maxlen=self._max_length, approximate=True,
                )]
            else:
                async with self._r.pipeline(transaction=False) as pipe:
                    for key, payload, event_type, _ in batch:
                        pipe.xadd(key, {b"e": payload, b"y": event_type},
                                  maxlen=self._max_length, approximate=True)
                    results = await pipe.execute(raise_on_error=False)
        except BaseException as exc:
            for *_, future in batch:
                if not future.done():
                    future.set_exception(exc if isinstance(exc, Exception)
                                         else RedisConnectionError("event log closed"))
            if not isinstance(exc, Exception):
                raise
            return
        for (*_, future), result in zip(batch, results, strict=True):
            if future.done():
                continue  # its caller went away
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)  # type: ignore[arg-type]

    async def close(self) -> None:
        """Stop writing; waiting callers get an error."""
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
