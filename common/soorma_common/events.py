"""The event envelope (CloudEvents-compatible) and the standard topics."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import Field, field_validator

from soorma_common._base import BaseDTO

ACTION_REQUESTS: Final = "action-requests"
ACTION_RESULTS: Final = "action-results"
BUSINESS_FACTS: Final = "business-facts"
SYSTEM_EVENTS: Final = "system-events"
NOTIFICATION_EVENTS: Final = "notification-events"
PLAN_EVENTS: Final = "plan-events"
TASK_EVENTS: Final = "task-events"
BILLING_EVENTS: Final = "billing-events"

STANDARD_TOPICS: Final[frozenset[str]] = frozenset(
    {
        ACTION_REQUESTS,
        ACTION_RESULTS,
        BUSINESS_FACTS,
        SYSTEM_EVENTS,
        NOTIFICATION_EVENTS,
        PLAN_EVENTS,
        TASK_EVENTS,
        BILLING_EVENTS,
    }
)

DLQ_SUFFIX: Final = ".dlq"
TOPIC_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def is_valid_topic(topic: str) -> bool:
    """Return True when ``topic`` matches the allowed topic-name pattern."""
    return bool(TOPIC_PATTERN.fullmatch(topic))


def dead_letter_topic(topic: str) -> str:
    """Name of the dead-letter topic for ``topic``."""
    return topic if topic.endswith(DLQ_SUFFIX) else topic + DLQ_SUFFIX


def new_event_id() -> str:
    return str(uuid.uuid4())


def utc_now() -> datetime:
    return datetime.now(UTC)


class EventEnvelope(BaseDTO):
    """One event on the bus.

    ``tenant_id`` and ``user_id`` are filled by the event service from the caller's
    identity; values sent by a client are overwritten.
    """

    id: str = Field(default_factory=new_event_id, min_length=1, max_length=128)
    source: str = Field(default="soorma", max_length=256)
    specversion: str = "1.0"
    type: str = Field(min_length=1, max_length=256)
    time: datetime = Field(default_factory=utc_now)
    data: dict[str, Any] = Field(default_factory=dict)
    subject: str | None = None
    # The pattern is documentation (JSON Schema); ``_check_topic`` enforces it, with a
    # message that says what a topic may contain.
    topic: str = Field(json_schema_extra={"pattern": TOPIC_PATTERN.pattern})
    correlation_id: str | None = None
    response_event: str | None = None
    response_topic: str = Field(
        default=ACTION_RESULTS, json_schema_extra={"pattern": TOPIC_PATTERN.pattern}
    )
    tenant_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    plan_id: str | None = None
    goal_id: str | None = None
    trace_id: str | None = None
    parent_event_id: str | None = None
    payload_schema_name: str | None = None

    @field_validator("topic", "response_topic")
    @classmethod
    def _check_topic(cls, value: str) -> str:
        if not is_valid_topic(value):
            raise ValueError(
                f"topic {value!r} is not a valid topic name: use lowercase letters, digits, "
                "'.', '_' or '-' (1-64 chars, starting with a letter or digit)"
            )
        return value


__all__ = [
    "ACTION_REQUESTS",
    "ACTION_RESULTS",
    "BILLING_EVENTS",
    "BUSINESS_FACTS",
    "DLQ_SUFFIX",
    "NOTIFICATION_EVENTS",
    "PLAN_EVENTS",
    "STANDARD_TOPICS",
    "SYSTEM_EVENTS",
    "TASK_EVENTS",
    "TOPIC_PATTERN",
    "EventEnvelope",
    "dead_letter_topic",
    "is_valid_topic",
    "new_event_id",
    "utc_now",
]
