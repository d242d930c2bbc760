"""Step recording: which request belongs to which state, and which triggers were applied.

Each action a state publishes gets a correlation id derived from (plan, triggering
event, state) and recorded *before* the request is sent, so the answer always finds its
plan, and a planner that died between saving and publishing re-sends the same request id
when the trigger is redelivered. Applied triggers are remembered (bounded), so a
redelivered trigger moves the plan once.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from soorma._propagation import current_event
from soorma_common.events import EventEnvelope

# Triggers remembered per plan for the redelivery guard (oldest dropped first).
APPLIED_MEMORY = 200
ID_NAMESPACE = uuid.UUID("6f1f4c2e-58a8-4f43-9b0e-5b1c0c1a9d21")
# A goal's plan id derives from the goal event's id (a redelivered goal finds its plan).
GOAL_NAMESPACE = uuid.UUID("0b8e6a4e-3d51-4b8e-a3c3-9f0f3f7d2c11")


def derived_id(*parts: str) -> str:
    """A stable id for ``parts``: the same step or end always gets the same id."""
    return str(uuid.uuid5(ID_NAMESPACE, "/".join(parts)))


def goal_plan_id(goal_id: str) -> str:
    """The id of the plan a planner opens for the goal event ``goal_id``.

    A plan's step request is the sub-plan's goal, so a parent knows its sub-plans' ids.
    """
    return str(uuid.uuid5(GOAL_NAMESPACE, goal_id))


def step_key(trigger: EventEnvelope | None) -> str | None:
    """What a step is keyed by: its trigger's id; without a trigger, the event being
    handled (a ``default_next`` step taken for it), else nothing (outside a handler)."""
    if trigger is not None:
        return trigger.id
    handled = current_event()
    return None if handled is None else f"{handled.id}/default_next"


class StepLedger:
    """A plan's outstanding requests and the triggers it already applied.

    Attributes:
        pending: Correlation id of each outstanding action request → its state.
        applied: Trigger key → the state it led to (insertion-ordered, bounded).
    """

    def __init__(
        self,
        pending: Mapping[str, str] | None = None,
        applied: Mapping[str, str] | None = None,
    ) -> None:
        self.pending: dict[str, str] = dict(pending or {})
        self.applied: dict[str, str] = dict(applied or {})

    def remember(self, key: str, state_name: str) -> None:
        """Record that trigger ``key`` led to ``state_name`` (dropping the oldest)."""
        self.applied[key] = state_name
        while len(self.applied) > APPLIED_MEMORY:
            self.applied.pop(next(iter(self.applied)))

    def correlation_for(self, state_name: str) -> str | None:
        """The newest outstanding request id of ``state_name``, if any."""
        for corr, name in reversed(list(self.pending.items())):
            if name == state_name:
                return corr
        return None

    def record_request(self, plan_id: str, key: str | None, seed: str, state_name: str) -> str:
        """Record the request ``state_name`` is about to send; return its id."""
        corr = derived_id(plan_id, key if key is not None else seed, state_name)
        self.pending[corr] = state_name
        return corr
