"""What the SDK keeps about a plan or a task beside the user's ``state``.

A record's ``state`` is the user's: it holds only what handlers put there. The SDK's own
bookkeeping (the goal's correlation id and caller, outstanding requests, applied
triggers, a ChoreographyPlanner's counters, steps, WAIT and audit trail) lives in the
record's typed ``bookkeeping`` field, never in ``state``.
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
        failure_reason: Why the plan failed.
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


__all__ = [
    "ChoreographyBookkeeping",
    "PlanBookkeeping",
    "TaskBookkeeping",
]
