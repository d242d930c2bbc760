"""Checks of topic names and event types, shared by the bus client and agent decorators."""

from __future__ import annotations

from soorma_common.events import is_valid_topic


def check_topic(topic: object, *, what: str = "topic") -> str:
    """``topic`` if it is a valid topic name (``TypeError``/``ValueError`` naming the fix)."""
    if topic is None or topic == "":
        raise TypeError(
            f"{what} is required: the bus never infers a topic from the event type; pass "
            f"{what}=... explicitly (e.g. 'action-requests', 'business-facts'), or use "
            "bus.request()/respond()/announce()"
        )
    if not isinstance(topic, str):
        raise TypeError(f"{what} must be a string, got {type(topic).__name__}")
    if not is_valid_topic(topic):
        raise ValueError(
            f"{what} {topic!r} is not a valid topic name: use lowercase letters, digits, "
            "'.', '_' or '-' (1-64 chars, starting with a letter or digit)"
        )
    return topic


def check_event_type(event_type: object, *, what: str = "event_type") -> str:
    """``event_type`` if it is a non-empty string (``ValueError`` otherwise)."""
    if not isinstance(event_type, str) or not event_type.strip():
        raise ValueError(f"{what} must be a non-empty string such as 'order.placed'")
    return event_type


__all__ = ["check_event_type", "check_topic"]
