"""Execution: carrying out a choreography decision, and carrying out a recorded one again.

Every request is registered with the plan (pending, counted, recorded under its step)
and stored *before* it is published, so a fast answer finds its plan and a redelivered
trigger finds the step instead of deciding again. ``plan.update`` re-runs a change after
a conflicting write, so concurrent handlers never lose a count or a pending request.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from soorma.ai import _steps
from soorma.ai._errors import CircuitBreakerOpen, PlannerError
from soorma.ai._keys import FINISHED, add_correlation, book, count_action, status
from soorma_common.decisions import (
    CompleteAction,
    DelegateAction,
    PlannerDecision,
    PublishAction,
    WaitAction,
)
from soorma_common.events import (
    ACTION_REQUESTS,
    ACTION_RESULTS,
    PLAN_WAITING_FOR_INPUT,
    SYSTEM_EVENTS,
    EventEnvelope,
)

if TYPE_CHECKING:
    from soorma.context import PlatformContext
    from soorma.planning.plan import PlanContext


def field_of(obj: Any, name: str) -> Any:
    """``obj[name]`` for a mapping, else ``obj.name`` (``None`` when missing)."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


async def check_breaker(plan: PlanContext, max_actions: int) -> None:
    """Fail the plan and raise once it took ``max_actions`` actions."""
    taken = book(plan).actions
    if taken >= max_actions:
        reason = (
            f"circuit breaker: plan {plan.plan_id} took {taken} actions, the limit is "
            f"max_actions={max_actions}"
        )
        if status(plan) not in FINISHED:
            await plan.fail(reason)
        raise CircuitBreakerOpen(reason, details={"plan_id": plan.plan_id, "actions": taken})


async def execute(
    decision: PlannerDecision,
    context: PlatformContext,
    goal_event: Any,
    plan: PlanContext | None,
    step_key: str | None,
) -> str | None:
    """Carry out ``decision`` (see ``ChoreographyPlanner.execute_decision``)."""
    action = decision.next_action
    if plan is None:
        step_key = None
    if isinstance(action, PublishAction | DelegateAction):
        return await send_request(action, context, plan, decision, step_key)
    if plan is not None:
        taken: list[dict[str, Any]] = []

        def count(p: PlanContext) -> None:
            taken[:] = [s for s in [_steps.recorded_step(p, step_key)] if s is not None]
            if taken:
                return  # another handler of the same trigger recorded it first
            count_action(p)
            if step_key is not None:
                _steps.record_step(p, step_key, decision, [])

        await plan.update(count)
        if taken:
            await replay(taken[0], context, plan, step_key)
            return None
    if isinstance(action, CompleteAction):
        await complete(action, context, goal_event, plan)
    elif isinstance(action, WaitAction):
        await wait(action, context, plan, step_key)
    return None


async def send_request(
    action: PublishAction | DelegateAction,
    context: PlatformContext,
    plan: PlanContext | None,
    decision: PlannerDecision | None = None,
    step_key: str | None = None,
) -> str:
    """Register the request with the plan, then publish it; its correlation id."""
    if isinstance(action, PublishAction):
        event_type, data, topic = action.event_type, action.data, action.topic
    else:
        event_type, data, topic = action.goal_event, action.goal_data, ACTION_REQUESTS
    if not action.response_event:
        raise PlannerError(
            f"{event_type!r} has no response_event: validate the decision with "
            "reason_next_action() or set response_event"
        )
    keyed = plan is not None and step_key is not None
    correlation_id = (
        _steps.derived_id(plan.plan_id, str(step_key), "request")
        if plan is not None and keyed
        else str(uuid.uuid4())
    )
    extra: dict[str, Any] = {}
    if plan is not None:
        extra = {"plan_id": plan.plan_id, "session_id": plan.session_id}
    bus = context.bus
    envelope = bus.inherit(
        bus.build_event(
            topic,
            event_type,
            data,
            correlation_id=correlation_id,
            response_event=action.response_event,
            response_topic=ACTION_RESULTS if topic == ACTION_REQUESTS else None,
            # A keyed step's request is its own id: sent again, it is the same event.
            event_id=correlation_id if keyed else None,
            **extra,
        )
    )
    if plan is not None:
        request = {
            "event_type": event_type,
            "response_event": action.response_event,
            "kind": action.action.value,
        }
        sent = [envelope.model_dump(mode="json", exclude_none=True)]
        taken: list[dict[str, Any]] = []

        def register(p: PlanContext) -> None:
            taken[:] = [s for s in [_steps.recorded_step(p, step_key)] if s is not None]
            if taken:
                return  # another handler of the same trigger recorded it first
            count_action(p)
            add_correlation(p, correlation_id)
            book(p).pending = {**book(p).pending, correlation_id: request}
            if step_key is not None and decision is not None:
                _steps.record_step(p, step_key, decision, sent)

        await plan.update(register)
        if taken:
            await replay(taken[0], context, plan, step_key)
            return correlation_id
    await bus.publish_event(envelope)
    return correlation_id


async def replay(
    step: dict[str, Any], context: PlatformContext, plan: PlanContext, step_key: str | None
) -> None:
    """Carry out a recorded step again without deciding: re-send its requests that are
    still unanswered (same event ids), end or pause the plan as it decided."""
    decision = _steps.recorded_decision(step)
    action = decision.next_action
    if isinstance(action, PublishAction | DelegateAction):
        pending = book(plan).pending
        again = [e for e in step.get("events") or [] if e.get("correlation_id") in pending]
        if status(plan) not in FINISHED:
            for raw in again:
                await context.bus.publish_event(EventEnvelope.model_validate(raw))
    elif isinstance(action, CompleteAction):
        if status(plan) in FINISHED:
            await plan.announce_end_again()
        else:
            await plan.finalize(action.result)
    elif isinstance(action, WaitAction) and status(plan) == "paused":
        await wait(action, context, plan, step_key)


async def complete(
    action: CompleteAction, context: PlatformContext, goal_event: Any, plan: PlanContext | None
) -> None:
    """Finalize the plan, or without one answer ``goal_event`` directly."""
    if plan is not None:
        await plan.finalize(action.result)
        return
    response_event = field_of(goal_event, "response_event")
    correlation_id = field_of(goal_event, "correlation_id")
    if not response_event or not correlation_id:
        raise PlannerError(
            "COMPLETE needs the plan, or a goal_event with response_event and "
            "correlation_id to answer"
        )
    await context.bus.respond(
        response_event,
        action.result,
        correlation_id=correlation_id,
        topic=field_of(goal_event, "response_topic") or ACTION_RESULTS,
    )


async def wait(
    action: WaitAction,
    context: PlatformContext,
    plan: PlanContext | None,
    step_key: str | None = None,
) -> None:
    """Pause the plan until ``action.expected_event`` and announce that it waits."""
    if plan is None:
        raise PlannerError("WAIT needs the plan (execute_decision(..., plan=plan)) to pause")

    def expect(p: PlanContext) -> None:
        book(p).waiting_for = action.expected_event
        book(p).wait_timeout = action.timeout_seconds

    await plan.update(expect)
    await plan.pause(action.reason)
    # The plan id always leads back to the plan (by-correlation), whatever the goal's
    # own correlation id was: whoever answers the wait must use it.
    correlation_id = plan.plan_id
    await context.bus.publish(
        SYSTEM_EVENTS,
        PLAN_WAITING_FOR_INPUT,
        {
            "plan_id": plan.plan_id,
            "correlation_id": correlation_id,
            "reason": action.reason,
            "expected_event": action.expected_event,
            "timeout_seconds": action.timeout_seconds,
        },
        correlation_id=correlation_id,
        plan_id=plan.plan_id,
        event_id=_steps.derived_id(plan.plan_id, step_key, "wait") if step_key else None,
    )
