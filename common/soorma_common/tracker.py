"""Wire models of the tracker service (``/v1/tracker``), shared by the service and the SDK.

Every timestamp is UTC. Lists are ordered as documented per endpoint and paginated with an
opaque ``next_cursor`` (``None`` on the last page): pass it back as ``?cursor=``.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from soorma_common.base import BaseDTO


class TrackedPlanStatus(StrEnum):
    """Plan lifecycle as the tracker sees it (``pending`` until ``plan.started``)."""

    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TrackedTaskStatus(StrEnum):
    """Task lifecycle.

    ``pending → running → delegated | waiting → completed | failed | cancelled``.
    """

    PENDING = "pending"
    RUNNING = "running"
    DELEGATED = "delegated"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class WaitStatus(StrEnum):
    """A human-input or planner wait: ``waiting`` until answered, or timed out."""

    WAITING = "waiting"
    ANSWERED = "answered"
    TIMED_OUT = "timed_out"


TERMINAL_PLAN_STATUSES = frozenset({"completed", "failed", "cancelled"})
TERMINAL_TASK_STATUSES = frozenset({"completed", "failed", "cancelled"})


class StateStep(BaseDTO):
    """One move of a plan's state machine (from a ``plan.state_changed`` event)."""

    from_state: str | None = None
    to_state: str
    trigger_event: str | None = Field(default=None, description="Event type that moved it")
    at: datetime
    event_id: str


class PlanSummary(BaseDTO):
    """A plan as listed by ``GET /v1/tracker/plans``."""

    plan_id: str
    tenant_id: str
    status: TrackedPlanStatus
    goal_event: str | None = Field(default=None, description="Type of the goal event")
    goal_event_id: str | None = Field(default=None, description="Id of the goal event")
    goal_correlation_id: str | None = None
    session_id: str | None = None
    parent_plan_id: str | None = None
    planner: str | None = Field(default=None, description="source of the plan's events")
    current_state: str | None = None
    reason: str | None = Field(default=None, description="Why it failed or paused")
    created_at: datetime = Field(description="First event of the plan seen")
    started_at: datetime | None = None
    updated_at: datetime = Field(description="Latest event of the plan seen")
    ended_at: datetime | None = None
    duration_ms: float | None = Field(default=None, description="started_at to ended_at")
    event_count: int = 0
    took_timeout_branch: bool = Field(
        default=False, description="A move of the plan was triggered by a timeout"
    )
    waiting_on_person: bool = Field(
        default=False, description="A human input of the plan is pending (lists only)"
    )
    waiting_until: datetime | None = Field(
        default=None, description="The earliest deadline of its pending human inputs"
    )
    cancelled_by: str | None = Field(
        default=None, description="Who asked to cancel a cancelled plan (lists only)"
    )


class PlanList(BaseDTO):
    """A page of plans, newest first (``created_at`` descending)."""

    plans: list[PlanSummary]
    next_cursor: str | None = None


class Wait(BaseDTO):
    """A time-bound wait: worker HITL (``human_input``) or planner WAIT (``plan_wait``)."""

    wait_id: str = Field(description="The sub-task id (human_input) or wait event id")
    kind: str = Field(description="'human_input' or 'plan_wait'")
    plan_id: str | None = None
    task_id: str | None = None
    sub_task_id: str | None = None
    expected_event: str | None = Field(default=None, description="The answer's event type")
    timeout_seconds: float | None = None
    deadline: datetime | None = None
    status: WaitStatus
    created_at: datetime
    answered_at: datetime | None = None
    timed_out_at: datetime | None = None
    timeout_event_id: str | None = Field(
        default=None, description="Id of the task.timeout / plan.wait_timeout published"
    )
    late_answer_at: datetime | None = Field(
        default=None, description="An answer that came after the timeout (not acted on)"
    )


class LlmAuditRecord(BaseDTO):
    """One LLM call of a ChoreographyPlanner plan (``plan.state['llm_audit']``)."""

    at: str | None = None
    attempt: str | None = None
    model: str | None = None
    prompt: list[dict[str, Any]] | None = None
    raw_output: str | None = None
    latency_ms: float | None = None
    tokens: dict[str, Any] = Field(default_factory=dict)
    valid: bool | None = None
    errors: list[str] = Field(default_factory=list)


class PlanContextView(BaseDTO):
    """What the memory service's plan context adds to the events (read as the plan's
    tenant): the state machine, current state, results and the LLM audit trail."""

    status: str | None = None
    current_state: str | None = None
    state_machine: dict[str, Any] = Field(default_factory=dict)
    results: dict[str, Any] = Field(default_factory=dict)
    llm_audit: list[LlmAuditRecord] = Field(default_factory=list)
    waiting_for: str | None = Field(default=None, description="Event a WAIT expects")
    correlation_ids: list[str] = Field(default_factory=list)
    version: int | None = None


class PlanDetail(PlanSummary):
    """``GET /v1/tracker/plans/{plan_id}``: the summary plus path, waits and context."""

    state_path: list[StateStep] = Field(default_factory=list)
    result: Any = Field(default=None, description="The plan's final answer, when completed")
    sub_plan_ids: list[str] = Field(default_factory=list)
    correlation_ids: list[str] = Field(default_factory=list)
    waits: list[Wait] = Field(default_factory=list)
    context: PlanContextView | None = Field(
        default=None, description="From the memory service; null when unavailable"
    )
    context_error: str | None = Field(
        default=None, description="Why context is null (plan gone from memory, unreachable)"
    )


class TimelineEntry(BaseDTO):
    """One event of a plan, in the order the tracker saw them."""

    seq: int = Field(description="Position in the tracker's log (increasing)")
    event_id: str
    type: str
    topic: str
    time: datetime
    source: str | None = None
    correlation_id: str | None = None
    summary: str = Field(description="One line a person can read")
    duration_ms: float | None = Field(
        default=None, description="For an answer: time since its request"
    )
    data: dict[str, Any] = Field(default_factory=dict)


class Timeline(BaseDTO):
    """A page of a plan's timeline, oldest first."""

    plan_id: str
    entries: list[TimelineEntry]
    next_cursor: str | None = None


class TaskSummary(BaseDTO):
    """A request (task) and, once answered, its result: one row of actions/tasks."""

    task_id: str | None = Field(default=None, description="The request's event id")
    correlation_id: str
    kind: str = Field(description="'action' (a request) or 'human_input'")
    plan_id: str | None = None
    event_type: str | None = None
    response_event: str | None = None
    answer_type: str | None = Field(
        default=None, description="event type of the answer (may differ from response_event)"
    )
    status: TrackedTaskStatus
    reason: str | None = None
    error: str | None = None
    requester: str | None = Field(default=None, description="source of the request")
    agent: str | None = Field(default=None, description="source of the answer")
    parent_task_id: str | None = None
    delegation_group_id: str | None = None
    progress: float | None = None
    requested_at: datetime | None = None
    responded_at: datetime | None = None
    latency_ms: float | None = None
    result: Any = None


class ActionList(BaseDTO):
    """``GET /v1/tracker/plans/{plan_id}/actions``: requests of the plan, oldest first."""

    plan_id: str
    actions: list[TaskSummary]
    next_cursor: str | None = None


class TaskDetail(TaskSummary):
    """``GET /v1/tracker/tasks/{task_id}``: a task with its sub-tasks and waits."""

    sub_tasks: list[TaskSummary] = Field(default_factory=list)
    waits: list[Wait] = Field(default_factory=list)


class DelegationGroup(BaseDTO):
    """``GET /v1/tracker/delegation-groups/{group_id}``: one fan-out and its members."""

    group_id: str
    parent_task_id: str | None = None
    plan_id: str | None = None
    sub_tasks: list[TaskSummary]
    counts: dict[str, int] = Field(description="Members per status")
    complete: bool = Field(description="Every member has an answer")


class StatusCounts(BaseDTO):
    total: int = 0
    by_status: dict[str, int] = Field(default_factory=dict)


class DurationStats(BaseDTO):
    """Counts, failure rate and durations of a group (goal type, agent, event type)."""

    key: str
    count: int
    completed: int
    failed: int
    failure_rate: float
    p50_ms: float | None = None
    p95_ms: float | None = None


class ProjectorStats(BaseDTO):
    events: int = Field(description="Events projected (duplicates excluded)")
    duplicates: int = 0
    malformed: int = Field(description="Events counted and skipped")
    timeouts_fired: int = 0


class TrackerMetrics(BaseDTO):
    """``GET /v1/tracker/metrics`` (the caller's tenant)."""

    plans: StatusCounts
    tasks: StatusCounts
    goal_types: list[DurationStats] = Field(description="Per goal event type (plan durations)")
    agents: list[DurationStats] = Field(description="Per answering agent (action latency)")
    event_types: list[DurationStats] = Field(description="Per request event type")
    actions: DurationStats = Field(description="All actions: latency from request to answer")
    waits: StatusCounts
    projector: ProjectorStats = Field(description="Platform-wide projector counters")


__all__ = [
    "TERMINAL_PLAN_STATUSES",
    "TERMINAL_TASK_STATUSES",
    "ActionList",
    "DelegationGroup",
    "DurationStats",
    "LlmAuditRecord",
    "PlanContextView",
    "PlanDetail",
    "PlanList",
    "PlanSummary",
    "ProjectorStats",
    "StateStep",
    "StatusCounts",
    "TaskDetail",
    "TaskSummary",
    "Timeline",
    "TimelineEntry",
    "TrackedPlanStatus",
    "TrackedTaskStatus",
    "TrackerMetrics",
    "Wait",
    "WaitStatus",
]
