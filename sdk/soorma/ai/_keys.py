"""A choreography plan's bookkeeping, and small facts read from a plan."""

from __future__ import annotations

from typing import TYPE_CHECKING

from soorma_common.bookkeeping import ChoreographyBookkeeping

if TYPE_CHECKING:
    from soorma.planning.plan import PlanContext

CHOREOGRAPHY_STATE = "choreography"
FINISHED = frozenset({"completed", "failed", "cancelled"})


def status(plan: PlanContext) -> str:
    """The plan's status as a plain string."""
    return str(plan.status or "")


def book(plan: PlanContext) -> ChoreographyBookkeeping:
    """The plan's choreography bookkeeping (created empty in the local copy if absent)."""
    if plan.bookkeeping.choreography is None:
        plan.bookkeeping.choreography = ChoreographyBookkeeping()
    return plan.bookkeeping.choreography


def count_action(plan: PlanContext) -> None:
    """Count one action towards the plan's circuit breaker (local copy)."""
    book(plan).actions += 1
    if status(plan) == "pending":
        plan.status = "running"


def add_correlation(plan: PlanContext, correlation_id: str) -> None:
    """Let ``correlation_id`` lead back to the plan (local copy)."""
    if correlation_id not in plan.correlation_ids:
        plan.correlation_ids.append(correlation_id)
