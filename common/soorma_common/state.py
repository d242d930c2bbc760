"""State-machine DTOs for planners: states, their actions and transitions."""

from __future__ import annotations

from typing import Any, Self

from pydantic import Field, model_validator

from soorma_common.base import BaseDTO
from soorma_common.events import PLAN_WAIT_TIMEOUT


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


class StateWait(BaseDTO):
    """A WAIT: the plan stays in its state until ``event`` arrives for it (correlated to
    the plan, e.g. released from the tracker) or ``timeout_seconds`` pass (the tracker
    then publishes ``plan.wait_timeout``).

    Entering the state announces ``plan.waiting_for_input``; the two outcomes become
    ordinary transitions of the state (``event`` → ``on_event``, ``plan.wait_timeout``
    → ``on_timeout``).
    """

    event: str = Field(min_length=1, description="The event type the plan waits for")
    on_event: str = Field(description="State to go to when it arrives")
    timeout_seconds: float | None = Field(default=None, gt=0, description="How long to wait")
    on_timeout: str | None = Field(default=None, description="State to go to on the timeout")
    reason: str = Field(default="", description="Why the plan waits (shown by the tracker)")

    @model_validator(mode="after")
    def _timeout_needs_a_target(self) -> Self:
        if (self.timeout_seconds is None) != (self.on_timeout is None):
            raise ValueError("a WAIT's timeout_seconds and on_timeout go together")
        return self


class StateConfig(BaseDTO):
    """One state of a plan's state machine."""

    state_name: str
    description: str = ""
    action: StateAction | None = None
    transitions: list[StateTransition] = Field(default_factory=list)
    default_next: str | None = None
    is_terminal: bool = False
    wait: StateWait | None = None

    @model_validator(mode="after")
    def _wait_outcomes(self) -> Self:
        """A WAIT's outcomes as transitions (once: a stored machine already has them)."""
        if self.wait is None:
            return self
        outcomes = [(self.wait.event, self.wait.on_event)]
        if self.wait.on_timeout is not None:
            outcomes.append((PLAN_WAIT_TIMEOUT, self.wait.on_timeout))
        known = {(t.on_event, t.to_state) for t in self.transitions}
        for on_event, to_state in outcomes:
            if (on_event, to_state) not in known:
                self.transitions.append(StateTransition(on_event=on_event, to_state=to_state))
        return self


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
    "StateWait",
]
