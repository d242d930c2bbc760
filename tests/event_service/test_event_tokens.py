"""Resume tokens and delivery ids round-trip and reject garbage with a clear error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from event_service.ids import format_token, parse_id, parse_ref, parse_token
from soorma_common.errors import ValidationFailed

topics = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True).filter(
    lambda t: "=" not in t and "," not in t
)
stream_ids = st.tuples(st.integers(0, 2**48), st.integers(0, 2**32)).map(lambda k: f"{k[0]}-{k[1]}")


@given(st.dictionaries(topics, stream_ids, min_size=1, max_size=8))
def test_resume_tokens_round_trip(positions: dict[str, str]) -> None:
    token = format_token(positions, list(positions))
    assert parse_token(token) == positions


@given(st.integers(0, 2**48), st.integers(0, 2**32), st.integers(1, 2**32))
def test_stream_ids_order_by_time_then_sequence_not_as_text(ms: int, seq: int, step: int) -> None:
    assert parse_id(f"{ms}-{seq}") < parse_id(f"{ms}-{seq + step}")
    assert parse_id(f"{ms}-{seq + step}") < parse_id(f"{ms + 1}-0")
    assert parse_id("9-5") < parse_id("10-0")


@pytest.mark.parametrize(
    "bad", ["", "topic", "topic=", "=1-0", "Topic=1-0", "t=1", "t=a-b", "t=1-0-0"]
)
def test_malformed_delivery_ids_are_rejected(bad: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        parse_ref(bad)
    assert "expected" in info.value.message
