"""What the SDK keeps about a plan or a task beside the user's ``state``.

A record's ``state`` is the user's: it holds only what handlers put there. The SDK's own
bookkeeping (the goal's correlation id and caller, outstanding requests, applied
triggers, a ChoreographyPlanner's counters, steps, WAIT and audit trail) lives in the
record's typed ``bookkeeping`` field.

Records written before that field existed kept the bookkeeping inside ``state`` (under
``_plan``, ``__soorma__``, ``choreography_*``, ``_waiting_for`` ...). :func:`lift_plan`
and :func:`lift_task` move such keys into ``bookkeeping`` whenever a record is read or
written, so old records stay readable and are migrated by their next write.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from soorma_common.base import BaseDTO


class ChoreographyBookkeeping(BaseDTO):
    """A ChoreographyPlanner's bookkeeping for one plan.

    Attributes:
        planner: Name of the planner that owns the plan.
        actions: Actions taken (the circuit breaker's count).
        pending: Outstanding requests by correlation id
            (``{"event_type", "response_event", "kind"}``).
        steps: Recorded steps by trigger key (``{"decision", "events"}``), newest last.
        answered: Correlation id → id of the event that answered it.
        waiting_for: The event a WAIT expects.
        wait_timeout: The WAIT's timeout in seconds.
        resumed_by: Id of the event that ended the last WAIT.
        audit: The LLM audit trail (newest last), credentials redacted.
    """

    planner: str | None = None
    actions: int = 0
    pending: dict[str, dict[str, Any]] = Field(default_factory=dict)
    steps: dict[str, dict[str, Any]] = Field(default_factory=dict)
    answered: dict[str, str] = Field(default_factory=dict)
    waiting_for: str | None = None
    wait_timeout: float | None = None
    resumed_by: str | None = None
    audit: list[dict[str, Any]] = Field(default_factory=list)


class PlanBookkeeping(BaseDTO):
    """The SDK's bookkeeping for one plan.

    Attributes:
        correlation_id: The goal's correlation id (carried by the answer).
        response_topic: Topic of the goal's answer.
        tenant_id: Tenant of the goal's caller.
        user_id: User of the goal's caller.
        pending: Correlation id of each outstanding action request → its state.
        applied: Trigger key → the state it led to (the redelivery guard).
        resume_status: Status to return to when a paused plan resumes.
        pause_reason: Why the plan is paused.
        failure_reason: Why the plan failed or was cancelled.
        cancelled_by: Who asked to cancel the plan (the request's user or tenant).
        deferred_events: Events that arrived while paused (replayed on resume).
        choreography: A ChoreographyPlanner's bookkeeping (``None`` for other plans).
    """

    correlation_id: str | None = None
    response_topic: str | None = None
    tenant_id: str | None = None
    user_id: str | None = None
    pending: dict[str, str] = Field(default_factory=dict)
    applied: dict[str, str] = Field(default_factory=dict)
    resume_status: str | None = None
    pause_reason: str | None = None
    failure_reason: str | None = None
    cancelled_by: str | None = None
    deferred_events: list[dict[str, Any]] = Field(default_factory=list)
    choreography: ChoreographyBookkeeping | None = None


class TaskBookkeeping(BaseDTO):
    """The SDK's bookkeeping for one worker task.

    Attributes:
        session_id: Session of the request.
        tenant_id: Tenant of the caller.
        user_id: User of the caller.
        agent_id: The worker handling the task.
        finish: The claim of the replica finishing the task (``{"by", "at"}``).
        sent: Requests sent for sub-tasks, by sub-task id (re-sent after a crash).
    """

    session_id: str | None = None
    tenant_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    finish: dict[str, Any] | None = None
    sent: dict[str, dict[str, Any]] = Field(default_factory=dict)


# Where older records kept the bookkeeping inside ``state``.
LEGACY_PLAN_META = "_plan"
LEGACY_TASK_META = "__soorma__"
# state key -> PlanBookkeeping field
LEGACY_PLAN_KEYS = {
    "resume_status": "resume_status",
    "pause_reason": "pause_reason",
    "failure_reason": "failure_reason",
    "deferred_events": "deferred_events",
}
# state key -> ChoreographyBookkeeping field
LEGACY_CHOREOGRAPHY_KEYS = {
    "choreography_planner": "planner",
    "choreography_actions": "actions",
    "choreography_pending": "pending",
    "choreography_steps": "steps",
    "choreography_answered": "answered",
    "_waiting_for": "waiting_for",
    "_wait_timeout": "wait_timeout",
    "_resumed_by": "resumed_by",
    "llm_audit": "audit",
}


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseDTO):
        return value.model_dump()
    return dict(value) if isinstance(value, dict) else {}


def lift_plan(data: Any) -> Any:
    """``data`` (a plan record's raw fields) with legacy bookkeeping moved out of state.

    Only a record whose state holds the ``_plan`` entry is one: every plan such an SDK
    wrote had it. Without it, keys like ``pause_reason`` are the user's and stay. The
    keys found in ``state`` win over ``bookkeeping``'s: they were written last.
    """
    if not isinstance(data, dict):
        return data
    state = data.get("state")
    if not isinstance(state, dict) or LEGACY_PLAN_META not in state:
        return data
    state = dict(state)
    book = _as_dict(data.get("bookkeeping"))
    meta = state.pop(LEGACY_PLAN_META, None)
    if isinstance(meta, dict):
        for name in ("correlation_id", "response_topic", "tenant_id", "user_id"):
            if name in meta:
                book[name] = meta[name]
        for name in ("pending", "applied"):
            if isinstance(meta.get(name), dict):
                book[name] = meta[name]
    for key, name in LEGACY_PLAN_KEYS.items():
        if key in state:
            book[name] = state.pop(key)
    moved = {name: state.pop(key) for key, name in LEGACY_CHOREOGRAPHY_KEYS.items() if key in state}
    if moved:
        book["choreography"] = {**_as_dict(book.get("choreography")), **moved}
    return {**data, "state": state, "bookkeeping": book}


def lift_task(data: Any) -> Any:
    """``data`` (a task record's raw fields) with legacy bookkeeping moved out of state."""
    if not isinstance(data, dict):
        return data
    state = data.get("state")
    if not isinstance(state, dict) or LEGACY_TASK_META not in state:
        return data
    state = dict(state)
    meta = state.pop(LEGACY_TASK_META)
    book = {**_as_dict(data.get("bookkeeping")), **(meta if isinstance(meta, dict) else {})}
    return {**data, "state": state, "bookkeeping": book}


__all__ = [
    "ChoreographyBookkeeping",
    "PlanBookkeeping",
    "TaskBookkeeping",
    "lift_plan",
    "lift_task",
]
