"""The event envelope (CloudEvents-compatible), the standard topics and the platform's own
event types."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import Field, field_validator

from soorma_common.base import BaseDTO

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

# The platform's own event types: published by the SDK (planners, workers) and the tracker,
# read by the tracker and the gateway. Every package uses these names, never the strings.
PLAN_STARTED: Final = "plan.started"
PLAN_STATE_CHANGED: Final = "plan.state_changed"
PLAN_PAUSED: Final = "plan.paused"
PLAN_RESUMED: Final = "plan.resumed"
PLAN_COMPLETED: Final = "plan.completed"
PLAN_FAILED: Final = "plan.failed"
PLAN_CANCELLED: Final = "plan.cancelled"
#: A request to cancel a plan (``reason`` in the data), published with the caller's
#: identity; the plan's owning planner ends it ``cancelled``.
PLAN_CANCEL_REQUESTED: Final = "plan.cancel_requested"
#: A request to cancel a worker task (data: ``task_id``, ``plan_id``, ``reason``), published
#: by a cancelled plan for its outstanding step requests and by a cancelled task for its
#: outstanding sub-tasks; the worker holding the task interrupts and ends it.
TASK_CANCEL_REQUESTED: Final = "task.cancel_requested"
#: A worker ended a task on a cancel request (data: ``task_id``, ``reason``); the task's
#: caller gets no answer.
TASK_CANCELLED: Final = "task.cancelled"
#: A ChoreographyPlanner's WAIT began (``timeout_seconds`` in the data).
PLAN_WAITING_FOR_INPUT: Final = "plan.waiting_for_input"
#: The tracker's answer to a WAIT that got no event in time.
PLAN_WAIT_TIMEOUT: Final = "plan.wait_timeout"
#: A worker's progress report on a task (becomes an A2A ``working`` update).
TASK_PROGRESS: Final = "task.progress"
#: The tracker's answer to a human-input request that got no response in time.
TASK_TIMEOUT: Final = "task.timeout"
#: A worker asks a human (A2A ``input-required``); ``response_event`` carries the answer.
HUMAN_INPUT: Final = "notification.human_input"
#: An artifact, or a chunk of one, sent while a task runs (on the answer's topic, before it).
TASK_ARTIFACT: Final = "task.artifact"

PLAN_LIFECYCLE_EVENTS: Final[frozenset[str]] = frozenset(
    {
        PLAN_STARTED,
        PLAN_STATE_CHANGED,
        PLAN_PAUSED,
        PLAN_RESUMED,
        PLAN_COMPLETED,
        PLAN_FAILED,
        PLAN_CANCELLED,
        PLAN_WAITING_FOR_INPUT,
        PLAN_WAIT_TIMEOUT,
    }
)
#: Platform event types that never answer a request.
NOT_ANSWERS: Final[frozenset[str]] = PLAN_LIFECYCLE_EVENTS | {
    PLAN_CANCEL_REQUESTED,
    TASK_CANCEL_REQUESTED,
    TASK_CANCELLED,
    TASK_PROGRESS,
    TASK_TIMEOUT,
    HUMAN_INPUT,
    TASK_ARTIFACT,
}

DLQ_SUFFIX: Final = ".dlq"
TOPIC_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
# W3C Trace Context (https://www.w3.org/TR/trace-context/): version-traceid-parentid-flags,
# lowercase hex; a later version may append fields after the flags.
TRACEPARENT_PATTERN: Final = re.compile(
    r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-[0-9a-zA-Z._-]*)?$"
)
MAX_TRACESTATE_LENGTH: Final = 512


def is_valid_topic(topic: str) -> bool:
    """Return True when ``topic`` matches the allowed topic-name pattern."""
    return bool(TOPIC_PATTERN.fullmatch(topic))


def dead_letter_topic(topic: str) -> str:
    """Name of the dead-letter topic for ``topic``."""
    return topic if topic.endswith(DLQ_SUFFIX) else topic + DLQ_SUFFIX


def check_traceparent(value: str) -> str:
    """Return ``value`` when it is a valid W3C ``traceparent``; raise ``ValueError`` otherwise."""
    match = TRACEPARENT_PATTERN.fullmatch(value)
    if (
        match is None
        or match.group(1) == "ff"
        or (match.group(1) == "00" and match.group(4) is not None)
        or match.group(2) == "0" * 32
        or match.group(3) == "0" * 16
    ):
        raise ValueError(
            f"traceparent {value[:80]!r} is not a W3C trace context: expected "
            "'00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>' in lowercase, "
            "with non-zero ids"
        )
    return value


def trace_id_of(traceparent: str) -> str:
    """The 32-hex trace id inside a (valid) ``traceparent``."""
    return traceparent[3:35]


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
    # The event's causal chain: the id of the event that started it (tracing off), or
    # the chain's W3C trace id when a tracing publisher started it (docs/tracing.md).
    trace_id: str | None = None
    parent_event_id: str | None = None
    payload_schema_name: str | None = None
    # W3C trace context of the span that published the event (``None`` when no tracing
    # publisher was involved); see docs/tracing.md.
    traceparent: str | None = Field(default=None, max_length=256)
    tracestate: str | None = Field(default=None, max_length=MAX_TRACESTATE_LENGTH)

    @field_validator("topic", "response_topic")
    @classmethod
    def _check_topic(cls, value: str) -> str:
        if not is_valid_topic(value):
            raise ValueError(
                f"topic {value!r} is not a valid topic name: use lowercase letters, digits, "
                "'.', '_' or '-' (1-64 chars, starting with a letter or digit)"
            )
        return value

    @field_validator("traceparent")
    @classmethod
    def _check_traceparent(cls, value: str | None) -> str | None:
        return value if value is None else check_traceparent(value)


__all__ = [
    "ACTION_REQUESTS",
    "ACTION_RESULTS",
    "BILLING_EVENTS",
    "BUSINESS_FACTS",
    "DLQ_SUFFIX",
    "HUMAN_INPUT",
    "NOTIFICATION_EVENTS",
    "NOT_ANSWERS",
    "PLAN_CANCELLED",
    "PLAN_CANCEL_REQUESTED",
    "PLAN_COMPLETED",
    "PLAN_EVENTS",
    "PLAN_FAILED",
    "PLAN_LIFECYCLE_EVENTS",
    "PLAN_PAUSED",
    "PLAN_RESUMED",
    "PLAN_STARTED",
    "PLAN_STATE_CHANGED",
    "PLAN_WAITING_FOR_INPUT",
    "PLAN_WAIT_TIMEOUT",
    "STANDARD_TOPICS",
    "SYSTEM_EVENTS",
    "TASK_ARTIFACT",
    "TASK_CANCELLED",
    "TASK_CANCEL_REQUESTED",
    "TASK_EVENTS",
    "TASK_PROGRESS",
    "TASK_TIMEOUT",
    "TOPIC_PATTERN",
    "EventEnvelope",
    "check_traceparent",
    "dead_letter_topic",
    "is_valid_topic",
    "new_event_id",
    "trace_id_of",
    "utc_now",
]
