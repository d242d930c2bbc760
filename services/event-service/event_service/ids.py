"""Stream ids (``<ms>-<seq>``, as Redis writes them) and SSE resume tokens.

A broadcast resume token lists the position of every topic of a stream:
``action-requests=1732233600000-0,business-facts=1732233600001-3``. A group delivery
token names one event: ``action-requests=1732233600000-0``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from soorma_common.errors import ValidationFailed
from soorma_common.events import TOPIC_PATTERN, is_valid_topic

StreamKey = tuple[int, int]

ZERO_ID = "0-0"
# ASCII digits only (``\d`` would take any Unicode digit), at most 19 each: always within
# the 64-bit range Redis ids have. OpenAPI declares the same patterns.
STREAM_ID_PATTERN = r"^[0-9]{1,19}-[0-9]{1,19}$"
DELIVERY_ID_PATTERN = rf"^{TOPIC_PATTERN.pattern[1:-1]}={STREAM_ID_PATTERN[1:]}"
_ID = re.compile(r"^([0-9]{1,19})-([0-9]{1,19})$")


def parse_id(stream_id: str) -> StreamKey:
    """``"1732233600000-3"`` -> ``(1732233600000, 3)``; raises ``ValidationFailed``."""
    match = _ID.fullmatch(stream_id)
    if match is None:
        raise ValidationFailed(
            f"invalid stream id {stream_id[:64]!r}: expected '<milliseconds>-<sequence>'",
            details={"id": stream_id[:64]},
        )
    return int(match.group(1)), int(match.group(2))


def format_id(key: StreamKey) -> str:
    return f"{key[0]}-{key[1]}"


def parse_ref(token: str) -> tuple[str, str]:
    """Split a delivery token ``topic=streamid`` into ``(topic, stream_id)``."""
    topic, sep, stream_id = token.partition("=")
    if not sep or not is_valid_topic(topic):
        raise ValidationFailed(
            f"invalid event id {token[:160]!r}: expected '<topic>=<stream id>' as sent in "
            "the SSE 'id:' line",
            details={"id": token[:160]},
        )
    parse_id(stream_id)
    return topic, stream_id


def parse_token(token: str) -> dict[str, str]:
    """Parse a broadcast resume token into ``{topic: stream_id}``."""
    positions: dict[str, str] = {}
    for part in token.split(","):
        part = part.strip()
        if part:
            topic, stream_id = parse_ref(part)
            positions[topic] = stream_id
    return positions


def format_token(positions: Mapping[str, str], topics: Iterable[str]) -> str:
    return ",".join(f"{topic}={positions[topic]}" for topic in topics)
