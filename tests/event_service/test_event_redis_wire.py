"""Every command the event service packs by hand is byte-for-byte what redis-py sends."""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import Connection

from event_service.backends.redis_appends import AppendCoalescer
from event_service.backends.redis_direct import EXEC, MULTI, DirectCommands, pack_xadd


@given(
    key=st.text(min_size=1, max_size=80),
    payload=st.binary(max_size=300),
    event_type=st.text(min_size=1, max_size=40),
    maxlen=st.integers(min_value=100, max_value=10**9),
)
def test_packed_xadd_matches_redis_py(
    key: str, payload: bytes, event_type: str, maxlen: int
) -> None:
    conn = Connection()
    expected = b"".join(
        conn.pack_command(
            "XADD", key, "MAXLEN", "~", str(maxlen), "*", "e", payload, "y", event_type
        )
    )
    assert pack_xadd(key, payload, event_type, str(maxlen).encode()) == expected


# Values that are easy to get wrong by hand: non-ASCII (length in bytes, not characters),
# RESP's own delimiters inside a value, NUL, and a payload over redis-py's 6,000-byte
# buffer cutoff (which it sends as separate chunks).
AWKWARD_PAYLOADS = [
    b"",
    b"\r\n$5\r\nMULTI\r\n",
    bytes(range(256)),
    '{"x": "été 雪 \u2028 🚀"}'.encode(),
    b"x" * 70_000,
]
AWKWARD_TEXT = ["t", "tenant-é/topic-雪", "type.with spaces\r\n", "🚀" * 30]


def test_multi_and_exec_match_redis_py() -> None:
    conn = Connection()
    assert b"".join(conn.pack_command("MULTI")) == MULTI
    assert b"".join(conn.pack_command("EXEC")) == EXEC


@pytest.mark.parametrize("payload", AWKWARD_PAYLOADS)
@pytest.mark.parametrize("text", AWKWARD_TEXT)
def test_packed_xadd_matches_redis_py_on_awkward_values(payload: bytes, text: str) -> None:
    conn = Connection()
    expected = b"".join(
        conn.pack_command("XADD", text, "MAXLEN", "~", "1000", "*", "e", payload, "y", text)
    )
    assert pack_xadd(text, payload, text, b"1000") == expected


class RecordingCommands(DirectCommands):
    """Real connections; keeps every hand-packed write for comparison."""

    def __init__(self, *, pool: ConnectionPool) -> None:
        super().__init__(pool=pool)
        self.sent: list[bytes] = []

    async def send_packed(self, packed: bytes, replies: int) -> list[Any]:
        self.sent.append(packed)
        return await super().send_packed(packed, replies)


def split_commands(wire: bytes) -> list[list[bytes]]:
    """The RESP arrays in ``wire`` (hiredis parses requests as it parses replies)."""
    reader = hiredis.Reader()
    reader.feed(wire)
    commands = []
    while (command := reader.gets()) is not False:
        commands.append(command)
    return commands


@pytest.mark.redis
@pytest.mark.asyncio
async def test_every_hand_packed_write_is_what_redis_py_would_send(
    redis_url: str, redis_prefix: str
) -> None:
    """Group-committed appends (alone, coalesced, with tap copies) and atomic batches:
    every byte written equals redis-py's packing of the same commands, and Redis
    stored each value intact."""
    pool = ConnectionPool.from_url(redis_url)
    commands = RecordingCommands(pool=pool)
    appends = AppendCoalescer(commands=commands, max_length=1000, timeout=10)
    client = Redis(connection_pool=pool)
    try:
        keys = [f"{redis_prefix}:{text}" for text in AWKWARD_TEXT]
        entries = [
            (keys[i % len(keys)], payload, AWKWARD_TEXT[i % len(AWKWARD_TEXT)])
            for i, payload in enumerate(AWKWARD_PAYLOADS * 2)
        ]
        ids = [await appends.xadd(*entries[0])]
        ids += await asyncio.gather(
            *(
                appends.xadd(
                    key, payload, event_type, tap_key=f"{redis_prefix}:tap" if i % 2 else None
                )
                for i, (key, payload, event_type) in enumerate(entries)
            )
        )
        ids += await appends.xadd_atomic(entries)

        assert len(commands.sent) >= 3  # one alone, one coalesced MULTI, one atomic MULTI
        conn = Connection()
        sent_commands = 0
        for wire in commands.sent:
            parsed = split_commands(wire)
            repacked = b"".join(b"".join(conn.pack_command(*command)) for command in parsed)
            assert repacked == wire
            sent_commands += sum(command[0] == b"XADD" for command in parsed)
        assert sent_commands == 1 + 3 * len(entries) // 2 + len(entries)

        stored = {}
        for key in set(keys):
            for entry_id, fields in await client.xrange(key):
                stored[key, entry_id] = fields
        for entry_id, (key, payload, event_type) in zip(
            ids, entries[:1] + entries * 2, strict=True
        ):
            assert stored[key, entry_id] == {b"e": payload, b"y": event_type.encode()}
    finally:
        await appends.close()
        await commands.close()
        await client.aclose()
        await pool.disconnect()
