"""What the projector reads from an event: parsed and checked once, so applying it cannot fail.

An event the tracker cannot make sense of (no tenant, a lifecycle event without a plan id, a
timeout that is not a number, ...) raises :class:`Malformed`; the projector counts it and
skips it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

PLAN_STARTED = "plan.started"
PLAN_STATE_CHANGED = "plan.state_changed"
PLAN_PAUSED = "plan.paused"
PLAN_RESUMED = "plan.resumed"
PLAN_COMPLETED = "plan.completed"
PLAN_FAILED = "plan.failed"
PLAN_CANCELLED = "plan.cancelled"
PLAN_WAITING = "plan.waiting_for_input"
PLAN_WAIT_TIMEOUT = "plan.wait_timeout"
TASK_PROGRESS = "task.progress"
TASK_TIMEOUT = "task.timeout"
HUMAN_INPUT = "notification.human_input"

PLAN_LIFECYCLE = frozenset(
    {
        PLAN_STARTED,
        PLAN_STATE_CHANGED,
        PLAN_PAUSED,
        PLAN_RESUMED,
        PLAN_COMPLETED,
        PLAN_FAILED,
        PLAN_CANCELLED,
        PLAN_WAITING,
        PLAN_WAIT_TIMEOUT,
    }
)
# An artifact (chunk) a worker sends before its answer, on the answer's topic.
TASK_ARTIFACT = "task.artifact"
# Platform event types that are never the answer to a request.
NOT_ANSWERS = PLAN_LIFECYCLE | {TASK_PROGRESS, TASK_TIMEOUT, HUMAN_INPUT, TASK_ARTIFACT}
ACTION_REQUESTS = "action-requests"
SYSTEM_EVENTS = "system-events"
DELEGATION_SUBJECT = "delegation-group:"
MAX_TIMEOUT_SECONDS = 366 * 86_400.0


class Malformed(ValueError):
    """The event cannot be projected (counted and skipped)."""


@dataclass(slots=True)
class Ev:
    """One event as the projector uses it."""

    tenant: str
    id: str
    type: str
    topic: str
    time: datetime
    source: str | None
    plan_id: str | None
    correlation_id: str | None
    parent_event_id: str | None
    session_id: str | None
    response_event: str | None
    subject: str | None
    data: dict[str, Any]
    # Filled for the event types that need them.
    timeout_seconds: float | None = None
    deadline: datetime | None = None

    @property
    def is_request(self) -> bool:
        return self.topic == ACTION_REQUESTS

    @property
    def task_key(self) -> str:
        """The correlation id that pairs this request with its answer."""
        return self.correlation_id or self.id

    @property
    def delegation_group(self) -> str | None:
        if self.subject and self.subject.startswith(DELEGATION_SUBJECT):
            group = self.subject[len(DELEGATION_SUBJECT) :]
            return group if 0 < len(group) <= 256 else None
        return None


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 256:
        raise Malformed(f"expected an id string, got {str(value)[:40]!r}")
    return value


def _time(value: Any) -> datetime:
    if isinstance(value, datetime):
        found = value
    elif isinstance(value, str):
        try:
            found = datetime.fromisoformat(value)
        except ValueError:
            raise Malformed(f"bad time {value[:40]!r}") from None
    else:
        raise Malformed("event has no time")
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Malformed(f"timeout_seconds must be a number, got {str(value)[:40]!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_TIMEOUT_SECONDS:
        raise Malformed(f"timeout_seconds out of range: {seconds!r}")
    return seconds


def parse(raw: Any) -> Ev:
    """An SDK ``Event`` (or any object with the envelope's attributes) as an :class:`Ev`.

    Raises:
        Malformed: the event cannot be projected.
    """
    try:
        data = raw.data
        tenant = raw.tenant_id
        if not isinstance(data, dict):
            raise Malformed("data is not an object")
        if not isinstance(tenant, str) or not tenant:
            raise Malformed("event has no tenant_id")
        ev = Ev(
            tenant=tenant,
            id=str(raw.id),
            type=str(raw.type),
            topic=str(raw.topic),
            time=_time(raw.time),
            source=(raw.source or None),
            plan_id=_str(raw.plan_id),
            correlation_id=_str(raw.correlation_id),
            parent_event_id=_str(raw.parent_event_id),
            session_id=_str(raw.session_id),
            response_event=raw.response_event or None,
            subject=raw.subject or None,
            data=data,
        )
    except Malformed:
        raise
    except Exception as exc:  # an attribute missing or of the wrong kind
        raise Malformed(f"unreadable event: {exc}") from exc
    if ev.type in PLAN_LIFECYCLE:
        plan_id = ev.plan_id or _str(data.get("plan_id"))
        if plan_id is None:
            raise Malformed(f"{ev.type} without a plan_id")
        ev.plan_id = plan_id
    if ev.type == HUMAN_INPUT:
        sub = _str(data.get("sub_task_id")) or ev.correlation_id
        if sub is None:
            raise Malformed("notification.human_input without sub_task_id")
        ev.correlation_id = sub
        _str(data.get("task_id"))
        if not isinstance(data.get("response_event") or ev.response_event, str):
            raise Malformed("notification.human_input without response_event")
        ev.timeout_seconds = _timeout(data.get("timeout_seconds"))
        if data.get("deadline") is not None:
            ev.deadline = _time(data.get("deadline"))
        elif ev.timeout_seconds is not None:
            ev.deadline = ev.time + timedelta(seconds=ev.timeout_seconds)
    if ev.type == PLAN_WAITING:
        ev.timeout_seconds = _timeout(data.get("timeout_seconds"))
        if ev.timeout_seconds is not None:
            ev.deadline = ev.time + timedelta(seconds=ev.timeout_seconds)
    if ev.type == TASK_TIMEOUT:
        sub = _str(data.get("sub_task_id")) or ev.correlation_id
        if sub is None:
            raise Malformed("task.timeout without sub_task_id")
        _str(data.get("task_id"))
    if ev.type == TASK_PROGRESS:
        progress = data.get("progress")
        if progress is not None and (
            isinstance(progress, bool) or not isinstance(progress, int | float)
        ):
            raise Malformed("task.progress with a non-numeric progress")
    return ev
