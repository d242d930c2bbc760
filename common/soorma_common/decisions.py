"""Planner decision DTOs: what an LLM planner may decide (publish, delegate, wait, complete).

``PlannerDecision.next_action`` is a discriminated union on ``action``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from soorma_common.base import BaseDTO


class PlanAction(StrEnum):
    """Actions a planner can take in response to an event."""

    PUBLISH = "publish"
    COMPLETE = "complete"
    WAIT = "wait"
    DELEGATE = "delegate"


class PublishAction(BaseDTO):
    """Publish a new event to trigger a worker."""

    action: Literal[PlanAction.PUBLISH] = PlanAction.PUBLISH
    event_type: str = Field(description="Event type to publish")
    topic: str = Field(default="action-requests", description="Topic for the event")
    data: dict[str, Any] = Field(default_factory=dict, description="Event payload")
    response_event: str | None = Field(default=None, description="Event the worker replies with")
    reasoning: str = Field(description="Why this event should be published")


class CompleteAction(BaseDTO):
    """Complete the plan and reply on the goal's response event."""

    action: Literal[PlanAction.COMPLETE] = PlanAction.COMPLETE
    result: dict[str, Any] = Field(description="Final result to return")
    reasoning: str = Field(description="Why the plan is now complete")


class WaitAction(BaseDTO):
    """Pause the plan until ``expected_event`` arrives."""

    action: Literal[PlanAction.WAIT] = PlanAction.WAIT
    reason: str = Field(description="Why the plan waits")
    expected_event: str = Field(description="Event type that resumes the plan")
    timeout_seconds: int | None = Field(default=3600, description="Timeout in seconds")
    reasoning: str = Field(default="", description="Why waiting is right now")


class DelegateAction(BaseDTO):
    """Delegate a sub-goal to another planner."""

    action: Literal[PlanAction.DELEGATE] = PlanAction.DELEGATE
    target_planner: str = Field(description="Name of the planner to delegate to")
    goal_event: str = Field(description="Goal event to send")
    goal_data: dict[str, Any] = Field(description="Goal parameters")
    response_event: str | None = Field(default=None, description="Event the delegate replies with")
    reasoning: str = Field(description="Why delegation is appropriate")


PlannerAction = Annotated[
    PublishAction | CompleteAction | WaitAction | DelegateAction,
    Field(discriminator="action"),
]


class PlannerDecision(BaseDTO):
    """An LLM's decision on what a plan does next."""

    plan_id: str = Field(description="Plan being executed")
    current_state: str = Field(description="Current state in the plan")
    next_action: PlannerAction = Field(description="Action to take")
    alternative_actions: list[PlannerAction] | None = Field(default=None)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    reasoning: str = Field(description="The model's reasoning for this decision")


__all__ = [
    "CompleteAction",
    "DelegateAction",
    "PlanAction",
    "PlannerAction",
    "PlannerDecision",
    "PublishAction",
    "WaitAction",
]
