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
from collections.abc import Sequence

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from event_service.backends.redis_direct import EXEC, MULTI, DirectCommands, pack_xadd

# Upper bound on one pipeline: keeps a single write (and its reply) small.
MAX_COALESCED = 512


class AppendCoalescer:
    """Coalesces concurrent single ``XADD`` calls into pipelined round trips."""

    def __init__(self, *, commands: DirectCommands, max_length: int, timeout: float) -> None:
        self._commands = commands
        self._max_length = str(max_length).encode()
        self._timeout = timeout
        self._queue: list[tuple[str, bytes, str, str | None, asyncio.Future[bytes]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def xadd(
        self, key: str, payload: bytes, event_type: str, *, tap_key: str | None = None
    ) -> bytes:
        """Append one entry (fields ``e`` and ``y``) to ``key``; returns its stream id.

        ``tap_key``: also append the entry there, in the same ``MULTI``.
        """
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._queue.append((key, payload, event_type, tap_key, future))
        if self._writer is None:
            # A task, not the caller, does the writing: a caller that goes away (client
            # disconnect cancels its request) must not strand the others' writes.
            self._writer = asyncio.create_task(self._write_all(), name="redis-appends")
        return await future

    async def xadd_atomic(self, items: Sequence[tuple[str, bytes, str]]) -> list[bytes]:
        """Append ``(key, payload, type)`` entries in one ``MULTI``; their stream ids.

        A batch is one request already, so it goes out at once, not through the queue.
        """
        maxlen = self._max_length
        packed = b"".join(
            [
                MULTI,
                *(
                    pack_xadd(key, payload, event_type, maxlen)
                    for key, payload, event_type in items
                ),
                EXEC,
            ]
        )
        try:
            async with asyncio.timeout(self._timeout):
                replies = await self._commands.send_packed(packed, len(items) + 2)
        except TimeoutError:
            raise RedisTimeoutError(f"no answer from Redis within {self._timeout} s") from None
        for reply in (*replies, *(replies[-1] or ())):
            if isinstance(reply, Exception):
                raise reply
        return list(replies[-1])

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

    async def _write(
        self, batch: list[tuple[str, bytes, str, str | None, asyncio.Future[bytes]]]
    ) -> None:
        maxlen = self._max_length
        commands = [
            pack_xadd(key, payload, event_type, maxlen) for key, payload, event_type, _, _ in batch
        ]
        # Tap copies go after the callers' own entries: results[i] stays caller i's id.
        commands += [
            pack_xadd(tap_key, payload, event_type, maxlen)
            for _, payload, event_type, tap_key, _ in batch
            if tap_key is not None
        ]
        try:
            # One timer per round trip, not per reply.
            async with asyncio.timeout(self._timeout):
                if len(commands) == 1:
                    results = await self._commands.send_packed(commands[0], 1)
                else:
                    # MULTI: readers blocked on the topic wake once for the whole
                    # batch instead of once for its first entry and again for the rest.
                    replies = await self._commands.send_packed(
                        b"".join([MULTI, *commands, EXEC]), len(commands) + 2
                    )
                    results = replies[-1]
                    if isinstance(results, Exception):
                        raise results
        except BaseException as exc:
            error: BaseException = exc
            if isinstance(exc, TimeoutError):
                error = RedisTimeoutError(f"no answer from Redis within {self._timeout} s")
            elif not isinstance(exc, Exception):
                error = RedisConnectionError("event log closed")
            for *_, future in batch:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(exc, Exception):
                raise
            return
        for (*_, future), result in zip(batch, results[: len(batch)], strict=True):
            if future.done():
                continue  # its caller went away
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def close(self) -> None:
        """Stop writing; waiting callers get an error."""
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
