"""Which transition an event takes, and what an ended plan says: reading a plan, no I/O.

The step that changes a plan is :func:`soorma.planning.engine.step`.
"""

from __future__ import annotations

from typing import Any

from soorma.planning.conditions import evaluate_condition
from soorma.planning.lifecycle import Ending
from soorma.planning.records import PlanState
from soorma_common.events import EventEnvelope
from soorma_common.memory import PlanStatus

# Terminal states with these names end the plan as failed rather than completed.
FAILED_STATE_NAMES = frozenset({"failed", "failure", "error", "aborted", "cancelled"})


def condition_names(plan: PlanState, event: EventEnvelope | None) -> dict[str, Any]:
    """The names a transition condition can use."""
    return {
        "data": event.data if event is not None else {},
        "event": event.model_dump(mode="json") if event is not None else {},
        "results": plan.results,
        "goal_data": plan.goal_data,
        "state": plan.state,
    }


def next_state(plan: PlanState, event: EventEnvelope) -> str | None:
    """The state ``event`` leads to from the current state, or ``None``.

    The first transition whose ``on_event`` is the event's type and whose ``condition``
    (if any) holds wins.
    """
    config = plan.state_machine.get(plan.current_state)
    if config is None:
        return None
    names: dict[str, Any] | None = None
    for transition in config.transitions:
        if transition.on_event != event.type:
            continue
        if transition.condition:
            names = names or condition_names(plan, event)
            if not evaluate_condition(transition.condition, names):
                continue
        return transition.to_state
    return None


def at_terminal_state(plan: PlanState) -> bool:
    """Whether the plan is at a terminal state of its machine (or has already ended)."""
    if plan.is_finished():
        return True
    config = plan.state_machine.get(plan.current_state)
    return bool(config and config.is_terminal)


def step_results(plan: PlanState) -> dict[str, Any]:
    """What the declarative driver answers a goal with: the step results."""
    return {k: v for k, v in plan.results.items() if k != "final"}


def interpolation_sources(plan: PlanState) -> dict[str, Any]:
    """What ``{...}`` placeholders in action data can reference."""
    return {
        "goal_data": plan.goal_data,
        "results": plan.results,
        "state": plan.state,
        "plan_id": plan.plan_id,
        "session_id": plan.session_id,
    }


def recorded_ending(plan: PlanState) -> Ending:
    """The end of a finished plan, rebuilt from what it stored."""
    if plan.status == PlanStatus.COMPLETED:
        return Ending.completed(plan.plan_id, plan.results.get("final"))
    if plan.status == PlanStatus.CANCELLED:
        book = plan.bookkeeping
        return Ending.cancelled(
            plan.plan_id, str(book.failure_reason or "cancelled"), book.cancelled_by
        )
    reason = str(plan.bookkeeping.failure_reason or plan.status)
    return Ending.failed(plan.plan_id, reason, str(plan.status))


def failure_text(plan: PlanState, failed_at: str | None, trigger: EventEnvelope | None) -> str:
    """``step 'searching' got web.search.failed: backend timed out``, or as much of it
    as is known."""
    if trigger is None:
        return f"plan reached state {plan.current_state!r}"
    detail = next(
        (
            str(trigger.data[key])
            for key in ("error", "reason", "message")
            if isinstance(trigger.data.get(key), str) and trigger.data[key]
        ),
        None,
    )
    where = failed_at if failed_at and failed_at != plan.current_state else None
    what = trigger.type + (f": {detail}" if detail else "")
    return f"step {where!r} got {what}" if where else what


__all__ = [
    "FAILED_STATE_NAMES",
    "at_terminal_state",
    "condition_names",
    "failure_text",
    "interpolation_sources",
    "next_state",
    "recorded_ending",
    "step_results",
]
