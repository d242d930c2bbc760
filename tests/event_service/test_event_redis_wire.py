"""The hand-packed XADD is byte-for-byte what redis-py would send."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection

from event_service.backends.redis_direct import pack_xadd


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
