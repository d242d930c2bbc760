"""Memory-service DTOs: task/plan contexts, plans, sessions, working memory."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from soorma_common.base import BaseDTO
from soorma_common.bookkeeping import PlanBookkeeping, TaskBookkeeping
from soorma_common.events import ACTION_RESULTS


class SubTaskStatus(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class PlanStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED_PLAN_STATUSES = frozenset({PlanStatus.COMPLETED, PlanStatus.FAILED, PlanStatus.CANCELLED})


class SubTaskRecord(BaseDTO):
    """A delegated sub-task tracked inside a task context."""

    sub_task_id: str
    event_type: str
    response_event: str
    status: SubTaskStatus = SubTaskStatus.PENDING
    parallel_group_id: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None


class TaskContextRecord(BaseDTO):
    """Persisted state of a worker task, so it can complete asynchronously.

    ``state`` is the user's; the SDK's own bookkeeping is in ``bookkeeping``.
    """

    task_id: str = Field(min_length=1, max_length=256)
    plan_id: str | None = None
    event_type: str = ""
    correlation_id: str | None = None
    response_event: str | None = None
    response_topic: str = ACTION_RESULTS
    data: dict[str, Any] = Field(default_factory=dict)
    sub_tasks: dict[str, SubTaskRecord] = Field(default_factory=dict)
    state: dict[str, Any] = Field(default_factory=dict)
    bookkeeping: TaskBookkeeping = Field(default_factory=TaskBookkeeping)
    version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None


class SubTaskResultRequest(BaseDTO):
    """Body of ``POST /v1/memory/task-context/{task_id}/sub-tasks/{sub_task_id}/result``."""

    status: SubTaskStatus = SubTaskStatus.COMPLETED
    result: dict[str, Any] | None = None
    error: str | None = None


class PlanContextRecord(BaseDTO):
    """Persisted state of a planner's plan.

    ``state`` is the user's; the SDK's own bookkeeping is in ``bookkeeping``.
    """

    plan_id: str = Field(min_length=1, max_length=256)
    session_id: str | None = None
    parent_plan_id: str | None = None
    goal_event: str = ""
    goal_data: dict[str, Any] = Field(default_factory=dict)
    response_event: str | None = None
    status: PlanStatus = PlanStatus.PENDING
    current_state: str | None = None
    state_machine: dict[str, Any] = Field(default_factory=dict)
    results: dict[str, Any] = Field(default_factory=dict)
    correlation_ids: list[str] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    bookkeeping: PlanBookkeeping = Field(default_factory=PlanBookkeeping)
    version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None


class PlanCreate(BaseDTO):
    plan_id: str | None = None
    goal_event: str
    goal_data: dict[str, Any] = Field(default_factory=dict)
    response_event: str | None = None
    session_id: str | None = None
    parent_plan_id: str | None = None
    status: PlanStatus = PlanStatus.PENDING


class PlanUpdate(BaseDTO):
    status: PlanStatus | None = None
    expected_version: int | None = None


class PlanSummary(BaseDTO):
    plan_id: str
    goal_event: str
    status: PlanStatus
    session_id: str | None = None
    parent_plan_id: str | None = None
    response_event: str | None = None
    version: int = 0
    created_at: datetime
    updated_at: datetime


class SessionCreate(BaseDTO):
    session_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class SessionSummary(BaseDTO):
    session_id: str
    name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    plan_count: int = 0
    created_at: datetime
    last_activity: datetime


class WorkingMemoryWrite(BaseDTO):
    key: str = Field(min_length=1, max_length=512)
    value: Any


class WorkingMemoryItem(BaseDTO):
    plan_id: str
    key: str
    value: Any
    updated_at: datetime | None = None


class AnswerClaim(BaseDTO):
    """Outcome of claiming a request before running it (``PUT .../answers/{id}/claim``).

    ``status`` is ``granted`` (the caller holds the claim until ``expires_at``; a
    renewal by the same ``owner`` moves it on), ``answered`` (the request has a recorded
    ``answer``: send that, do not run) or ``held`` (``owner`` holds it until
    ``expires_at``: wait for its answer or for the claim to expire).
    """

    request_id: str
    status: Literal["granted", "answered", "held"]
    owner: str | None = Field(
        default=None, description="Holder of the claim (granted, held); null when answered"
    )
    expires_at: datetime | None = Field(
        default=None, description="When the claim lapses unless renewed (granted, held)"
    )
    answer: dict[str, Any] | None = Field(
        default=None, description="The recorded answer (answered only)"
    )


__all__ = [
    "FINISHED_PLAN_STATUSES",
    "AnswerClaim",
    "PlanContextRecord",
    "PlanCreate",
    "PlanStatus",
    "PlanSummary",
    "PlanUpdate",
    "SessionCreate",
    "SessionSummary",
    "SubTaskRecord",
    "SubTaskResultRequest",
    "SubTaskStatus",
    "TaskContextRecord",
    "WorkingMemoryItem",
    "WorkingMemoryWrite",
]
