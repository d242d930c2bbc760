"""The plan engine's pure step: a plan and an event in, the next plan and what to announce out.

Nothing here does I/O or reads the clock: :func:`step` (and :func:`end`, :func:`fail`,
:func:`cancel`) take a :class:`~soorma.planning.records.PlanState` and return a
:class:`Step` (the next plan, whether it must be stored, and the events that announce it)
without changing their input. :class:`~soorma.planning.plan.PlanContext` runs them inside
:func:`~soorma._versioned.apply_change` (so after a conflicting write they run again on
the fresh plan), stores the result, then publishes the step's events. Reading a plan
(which transition an event takes, how an ended plan ended) is
:mod:`soorma.planning.transitions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from soorma.planning.interpolate import interpolate
from soorma.planning.lifecycle import Ending
from soorma.planning.records import PlanState
from soorma.planning.transitions import (
    FAILED_STATE_NAMES,
    at_terminal_state,
    failure_text,
    interpolation_sources,
    next_state,
    recorded_ending,
    step_results,
)
from soorma_common.events import (
    PLAN_STARTED,
    PLAN_STATE_CHANGED,
    PLAN_WAITING_FOR_INPUT,
    EventEnvelope,
)
from soorma_common.memory import PlanStatus


@dataclass(frozen=True, slots=True)
class Notice:
    """A ``plan.*`` lifecycle event to publish: its type and payload."""

    type: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Request:
    """A state's action request to publish; its event id is its correlation id."""

    state: str
    topic: str
    event_type: str
    data: dict[str, Any]
    correlation_id: str
    response_event: str | None


@dataclass(frozen=True, slots=True)
class Step:
    """What a step makes of a plan.

    Attributes:
        plan: The plan after the step (the input itself when nothing changed).
        changed: Whether ``plan`` must be stored.
        entered: The state entered, if the step moved the plan.
        notices: Lifecycle events announcing the move, in order.
        request: The action request to publish (the entered state's, or, for a
            redelivered trigger, the current state's again under the same id).
        ending: How the plan ended by this step, or, when nothing changed, the
            recorded end to announce again (a redelivered trigger that ended it).
    """

    plan: PlanState
    changed: bool = False
    entered: str | None = None
    notices: tuple[Notice, ...] = ()
    request: Request | None = None
    ending: Ending | None = None


def request_for(plan: PlanState, state_name: str) -> Request | None:
    """The action request ``state_name`` has outstanding, with placeholders filled."""
    action = plan.state_machine[state_name].action
    corr = plan.steps.correlation_for(state_name)
    if action is None or corr is None:
        return None
    return Request(
        state=state_name,
        topic=action.topic,
        event_type=action.event_type,
        data=interpolate(action.data or {}, interpolation_sources(plan)),
        correlation_id=corr,
        response_event=action.response_event,
    )


# -- the step ------------------------------------------------------------------------


def step(
    plan: PlanState, trigger: EventEnvelope | None, *, key: str | None, finish: bool = False
) -> Step:
    """Take the transition ``trigger`` selects (``default_next`` without one).

    Args:
        plan: The plan (not changed).
        trigger: The event to apply, or ``None``.
        key: What names this step (the trigger's id, or the handled event's for a
            ``default_next`` step; see :func:`~soorma.planning.steps.step_key`): a key
            the plan already applied changes nothing.
        finish: When the state entered is terminal, end the plan in the same step.

    Returns:
        The step. Nothing changes for an ended plan (a trigger that ended it gets the
        end to announce again), a late or duplicate answer, or an event no transition
        takes; a paused plan keeps the trigger for its resume.
    """
    if plan.is_finished():
        if key is not None and key in plan.steps.applied:
            return Step(plan, ending=recorded_ending(plan))
        return Step(plan)
    if plan.status == PlanStatus.PAUSED:
        return _defer(plan, trigger)
    after = plan.copy()
    changed, previous, entered = _advance(after, trigger, key)
    if entered is None:
        if changed:
            return Step(after, changed=True)
        if key is not None and plan.steps.applied.get(key) == plan.current_state:
            # Applied by an earlier delivery that may have died before sending its
            # request: send it again under the same id.
            return Step(plan, request=request_for(plan, plan.current_state))
        return Step(plan)
    notices = []
    if plan.status == PlanStatus.PENDING:
        notices.append(Notice(PLAN_STARTED, {"status": PlanStatus.RUNNING.value}))
    notices.append(
        Notice(
            PLAN_STATE_CHANGED,
            {
                "from_state": previous,
                "to_state": entered,
                "status": after.status,
                "trigger_event": trigger.type if trigger else None,
            },
        )
    )
    wait = after.state_machine[entered].wait
    if wait is not None:
        notices.append(
            Notice(
                PLAN_WAITING_FOR_INPUT,
                {
                    "expected_event": wait.event,
                    "timeout_seconds": wait.timeout_seconds,
                    "reason": wait.reason or f"waiting for {wait.event}",
                },
            )
        )
    ending = None
    if finish and at_terminal_state(after):
        ending = _end(after, step_results(after), failed_at=previous, trigger=trigger)
    return Step(
        after,
        changed=True,
        entered=entered,
        notices=tuple(notices),
        request=request_for(after, entered),
        ending=ending,
    )


def _defer(plan: PlanState, trigger: EventEnvelope | None) -> Step:
    """Keep an event that arrived while paused; the resume replays it."""
    deferred = plan.bookkeeping.deferred_events
    if trigger is None or any(e.get("id") == trigger.id for e in deferred):
        return Step(plan)
    after = plan.copy()
    after.bookkeeping.deferred_events = [*deferred, trigger.model_dump(mode="json")]
    return Step(after, changed=True)


def _advance(
    plan: PlanState, trigger: EventEnvelope | None, key: str | None
) -> tuple[bool, str | None, str | None]:
    """Advance ``plan`` (a copy) for ``trigger``: (changed, from_state, entered_state)."""
    changed = False
    if key is not None and key in plan.steps.applied:
        return False, None, None  # already applied by an earlier delivery
    if trigger is not None:
        corr = trigger.correlation_id or ""
        answered = plan.steps.pending.get(corr)
        if answered is not None:
            if answered != plan.current_state:
                return False, None, None  # late answer to a step the plan has left
            plan.results[answered] = trigger.data
            del plan.steps.pending[corr]
            changed = True
        elif corr in plan.correlation_ids and corr != plan.plan_id:
            return False, None, None  # duplicate answer to a finished step
        target_name = next_state(plan, trigger)
    else:
        config = plan.state_machine.get(plan.current_state)
        target_name = config.default_next if config else None
        starting = plan.status == PlanStatus.PENDING
        if config is not None and config.action is not None and starting:
            # An initial state with its own action: run it rather than move on.
            target_name = plan.current_state
    if target_name is None or target_name not in plan.state_machine:
        return changed, None, None
    previous = plan.current_state
    plan.current_state = target_name
    if plan.status == PlanStatus.PENDING:
        plan.status = PlanStatus.RUNNING
    if plan.state_machine[target_name].action is not None:
        corr = plan.steps.record_request(plan.plan_id, key, f"default-{plan.version}", target_name)
        if corr not in plan.correlation_ids:
            plan.correlation_ids.append(corr)
    if key is not None:
        plan.steps.remember(key, target_name)
    return True, previous, target_name


# -- ending --------------------------------------------------------------------------


def end(plan: PlanState, result: Mapping[str, Any] | None) -> Step:
    """End the plan as ``finalize(result)`` does (failed at a state named like
    ``failed``); nothing for a plan that has already ended."""
    if plan.is_finished():
        return Step(plan)
    after = plan.copy()
    return Step(after, changed=True, ending=_end(after, result))


def fail(plan: PlanState, reason: str) -> Step:
    """End the plan as failed for ``reason``; nothing for a plan that has already ended."""
    if plan.is_finished():
        return Step(plan)
    after = plan.copy()
    return Step(after, changed=True, ending=_fail(after, reason))


def cancel(plan: PlanState, reason: str, by: str | None) -> Step:
    """End the plan as cancelled; nothing for a plan that has already ended."""
    if plan.is_finished():
        return Step(plan)
    after = plan.copy()
    after.status = PlanStatus.CANCELLED
    after.bookkeeping.failure_reason = reason
    after.bookkeeping.cancelled_by = by
    after.bookkeeping.pause_reason = None
    return Step(after, changed=True, ending=Ending.cancelled(plan.plan_id, reason, by))


def _end(
    plan: PlanState,
    result: Mapping[str, Any] | None,
    *,
    failed_at: str | None = None,
    trigger: EventEnvelope | None = None,
) -> Ending:
    """End ``plan`` (a copy). A failed end without an explicit ``reason`` says where and
    why: the step the plan left (``failed_at``) and the answer that moved it."""
    if plan.current_state.lower() in FAILED_STATE_NAMES:
        reason = (result or {}).get("reason") if isinstance(result, Mapping) else None
        return _fail(plan, str(reason or failure_text(plan, failed_at, trigger)))
    final = dict(result) if result is not None else None
    plan.status = PlanStatus.COMPLETED
    plan.results["final"] = final
    return Ending.completed(plan.plan_id, final)


def _fail(plan: PlanState, reason: str) -> Ending:
    plan.status = PlanStatus.FAILED
    plan.bookkeeping.failure_reason = reason
    return Ending.failed(plan.plan_id, reason)


# -- pausing -------------------------------------------------------------------------


def pause(plan: PlanState, reason: str) -> Step:
    """Pause the plan; nothing for a plan that has ended or is paused already."""
    if plan.is_finished() or plan.status == PlanStatus.PAUSED:
        return Step(plan)
    after = plan.copy()
    after.bookkeeping.resume_status = str(plan.status)
    after.status = PlanStatus.PAUSED
    after.bookkeeping.pause_reason = reason
    return Step(after, changed=True)


def resume(plan: PlanState, input_data: Mapping[str, Any]) -> Step:
    """Resume a paused plan with ``input_data`` (its ``results["user_input"]``); the
    events deferred meanwhile stay in its bookkeeping (see :func:`take_deferred`)."""
    if plan.status != PlanStatus.PAUSED:
        return Step(plan)
    after = plan.copy()
    status = PlanStatus(plan.bookkeeping.resume_status or PlanStatus.RUNNING)
    after.status = PlanStatus.RUNNING if status == PlanStatus.PAUSED else status
    after.bookkeeping.resume_status = None
    after.bookkeeping.pause_reason = None
    after.results["user_input"] = dict(input_data)
    return Step(after, changed=True)


def take_deferred(plan: PlanState) -> tuple[PlanState, list[dict[str, Any]]]:
    """The plan without its deferred events, and those events (oldest first)."""
    after = plan.copy()
    after.bookkeeping.deferred_events = []
    return after, list(plan.bookkeeping.deferred_events)


__all__ = [
    "Notice",
    "Request",
    "Step",
    "cancel",
    "end",
    "fail",
    "pause",
    "request_for",
    "resume",
    "step",
    "take_deferred",
]
