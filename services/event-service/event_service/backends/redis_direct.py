"""The two hottest Redis commands, sent on redis-py connections without the client layer.

``Redis.execute_command`` wraps every command in a retry policy, telemetry hooks, a
pool round trip and reply callbacks; on the publish path (``XADD``) and the fan-out
path (``XREAD BLOCK``) that layer cost more server CPU than the HTTP handling did.
:class:`DirectCommands` keeps a few connections of a redis-py pool to itself and
speaks to them directly (``pack_command`` / ``send_packed_command`` /
``read_response``: redis-py's connection API, hiredis-parsed). Everything else still
goes through the ordinary client.
"""

from __future__ import annotations

import math
from typing import Any

from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ResponseError

# Idle connections kept for reuse; more concurrent callers borrow from the pool.
_MAX_IDLE = 32


class DirectCommands:
    """Raw command and pipeline calls on connections borrowed from ``pool``.

    Connections whose pool sets no socket timeout block for as long as the command
    does (``XREAD BLOCK`` is bounded server-side); callers needing a bound put one
    ``asyncio.timeout`` around a whole call rather than paying a timer per reply.
    """

    def __init__(self, *, pool: ConnectionPool) -> None:
        self._pool = pool
        self._idle: list[AbstractConnection] = []

    async def _acquire(self) -> AbstractConnection:
        if self._idle:
            return self._idle.pop()
        return await self._pool.get_connection()

    async def _release(self, conn: AbstractConnection) -> None:
        # A connection that failed mid-command was disconnected by redis-py and
        # reconnects on its next use, so every connection can go back.
        if len(self._idle) < _MAX_IDLE:
            self._idle.append(conn)
        else:
            await self._pool.release(conn)

    async def execute(self, *args: Any) -> Any:
        """One command; its decoded-as-bytes reply. Raises ``ResponseError`` on error."""
        conn = await self._acquire()
        try:
            await conn.send_packed_command(conn.pack_command(*args), check_health=False)
            return await conn.read_response(timeout=math.inf)
        finally:
            await self._release(conn)

    async def send_packed(self, packed: bytes, replies: int) -> list[Any]:
        """Send commands already packed in RESP (see :func:`pack_xadd`) in one write;
        ``replies`` replies in order, errors as ``ResponseError``."""
        conn = await self._acquire()
        try:
            await conn.send_packed_command(packed, check_health=False)
            out: list[Any] = []
            for _ in range(replies):
                try:
                    out.append(await conn.read_response(timeout=math.inf))
                except ResponseError as exc:
                    out.append(exc)
            return out
        finally:
            await self._release(conn)

    async def close(self) -> None:
        """Hand the idle connections back to the pool (which owns and closes them)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await self._pool.release(conn)


def xread_entries(reply: Any) -> list[tuple[bytes, list[tuple[bytes, list[bytes]]]]]:
    """``XREAD`` reply as ``[(key, [(id, [field, value, ...]), ...]), ...]``.

    RESP3 (redis-py's default protocol) answers a map, RESP2 a list of pairs.
    """
    if not reply:
        return []
    pairs = reply.items() if isinstance(reply, dict) else reply
    return [(key, rows) for key, rows in pairs]


def fields_of(flat: list[bytes] | None) -> dict[bytes, bytes]:
    """``[f1, v1, f2, v2, ...]`` as a dict (empty for an entry deleted while pending)."""
    if not flat:
        return {}
    it = iter(flat)
    return dict(zip(it, it, strict=True))


MULTI = b"*1\r\n$5\r\nMULTI\r\n"
EXEC = b"*1\r\n$4\r\nEXEC\r\n"


def pack_xadd(key: str, payload: bytes, event_type: str, maxlen: bytes) -> bytes:
    """``XADD key MAXLEN ~ maxlen * e payload y event_type`` in RESP, in one format.

    redis-py's generic ``pack_command`` encodes each argument in Python and was the
    largest cost of a 100-event batch append (8-25x the time of this one format, measured
    in ``docs/benchmarks.md``). ``tests/event_service/test_event_redis_wire.py`` checks
    that every write made with it (and ``MULTI``/``EXEC``) is byte for byte what
    redis-py's packer sends, binary and non-ASCII values included.
    """
    k = key.encode()
    y = event_type.encode()
    return (
        b"*10\r\n$4\r\nXADD\r\n$%d\r\n%b\r\n$6\r\nMAXLEN\r\n$1\r\n~\r\n$%d\r\n%b\r\n"
        b"$1\r\n*\r\n$1\r\ne\r\n$%d\r\n%b\r\n$1\r\ny\r\n$%d\r\n%b\r\n"
        % (len(k), k, len(maxlen), maxlen, len(payload), payload, len(y), y)
    )
