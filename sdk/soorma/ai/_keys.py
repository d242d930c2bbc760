"""What a choreography plan keeps about itself, and small facts read from a plan."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from soorma.plan_context import PlanContext

# Keys the planner keeps in ``plan.state`` (persisted with the plan).
ACTIONS_KEY = "choreography_actions"
PENDING_KEY = "choreography_pending"
OWNER_KEY = "choreography_planner"
WAITING_KEY = "_waiting_for"
WAIT_TIMEOUT_KEY = "_wait_timeout"
RESUMED_BY_KEY = "_resumed_by"

WAITING_FOR_INPUT = "plan.waiting_for_input"
WAIT_TIMEOUT = "plan.wait_timeout"
CHOREOGRAPHY_STATE = "choreography"
FINISHED = frozenset({"completed", "failed", "cancelled"})


def status(plan: PlanContext) -> str:
    """The plan's status as a plain string."""
    return str(plan.status or "")


def count_action(plan: PlanContext) -> None:
    """Count one action towards the plan's circuit breaker (local copy)."""
    plan.state[ACTIONS_KEY] = int(plan.state.get(ACTIONS_KEY, 0)) + 1
    if status(plan) == "pending":
        plan.status = "running"


def add_correlation(plan: PlanContext, correlation_id: str) -> None:
    """Let ``correlation_id`` lead back to the plan (local copy)."""
    if correlation_id not in plan.correlation_ids:
        plan.correlation_ids.append(correlation_id)
