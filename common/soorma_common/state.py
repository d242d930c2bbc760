"""State-machine DTOs for planners: states, their actions and transitions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from soorma_common.base import BaseDTO


class StateAction(BaseDTO):
    """Action executed when a plan enters a state."""

    event_type: str = Field(description="Event to publish")
    response_event: str = Field(description="Expected response event")
    data: dict[str, Any] | None = Field(default=None, description="Payload template")
    topic: str = Field(default="action-requests", description="Topic to publish on")


class StateTransition(BaseDTO):
    """A transition to ``to_state`` when ``on_event`` arrives (and ``condition`` holds)."""

    on_event: str = Field(description="Event type that triggers this transition")
    to_state: str = Field(description="Target state name")
    condition: str | None = Field(default=None, description="Optional condition expression")


class StateConfig(BaseDTO):
    """One state of a plan's state machine."""

    state_name: str
    description: str = ""
    action: StateAction | None = None
    transitions: list[StateTransition] = Field(default_factory=list)
    default_next: str | None = None
    is_terminal: bool = False


class PlanDefinition(BaseDTO):
    """A named state machine, used to register plan types."""

    plan_type: str
    description: str = ""
    initial_state: str = "start"
    states: dict[str, StateConfig]


class PlanRegistrationRequest(BaseDTO):
    plan: PlanDefinition


class PlanInstanceRequest(BaseDTO):
    plan_type: str
    goal_data: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    parent_plan_id: str | None = None


__all__ = [
    "PlanDefinition",
    "PlanInstanceRequest",
    "PlanRegistrationRequest",
    "StateAction",
    "StateConfig",
    "StateTransition",
]
