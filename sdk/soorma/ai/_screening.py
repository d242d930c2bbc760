"""Screening: which incoming events a choreography plan reacts to.

An answer to a request the planner published is recorded in ``plan.results[<request
event type>]``; while the plan is paused by WAIT only the expected event (or its
timeout) gets through and resumes it; events for finished plans, echoes of the
planner's own requests and second answers to one request are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from soorma.ai import _steps
from soorma.ai._keys import FINISHED, book, status
from soorma_common.events import PLAN_WAIT_TIMEOUT, EventEnvelope

if TYPE_CHECKING:
    from soorma.planning.plan import PlanContext

logger = logging.getLogger("soorma.choreography")


def wait_timeout_for(event: EventEnvelope, plan: PlanContext) -> bool:
    """Whether a ``plan.wait_timeout`` event ends this plan's current WAIT."""
    data = event.data if isinstance(event.data, Mapping) else {}
    if (data.get("plan_id") or event.plan_id or event.correlation_id) != plan.plan_id:
        return False
    expected = data.get("expected_event")
    return status(plan) == "paused" and (expected is None or expected == book(plan).waiting_for)


async def accept_event(event: EventEnvelope, plan: PlanContext, planner: str) -> bool:
    """Apply ``event`` to ``plan`` for the planner named ``planner``; ``True``: react."""
    owner = book(plan).planner
    if owner is not None and owner != planner:
        return False  # another planner's plan (e.g. the parent of our sub-plan)
    current = status(plan)
    if current in FINISHED:
        if _steps.recorded_step(plan, event.id) is not None:
            # The trigger of the step that ended the plan, delivered again: its first
            # handling may have died (or lost the event service) between storing the
            # end and announcing it. step() re-announces it.
            return True
        logger.debug("plan %s is %s; ignoring %s", plan.plan_id, current, event.type)
        return False
    pending: dict[str, Any] = book(plan).pending
    request = pending.get(event.correlation_id or "")
    if request is not None and event.type == request["event_type"]:
        return False  # our own request, seen on a topic the planner listens to
    if request is None:
        answer_id = _steps.answered_by(plan, event.correlation_id)
        if answer_id is not None and answer_id != event.id:
            logger.info(
                "plan %s: a second answer to %s (%s) is dropped",
                plan.plan_id,
                event.correlation_id,
                event.type,
            )
            return False
    if event.type == PLAN_WAIT_TIMEOUT and not (
        wait_timeout_for(event, plan) or book(plan).resumed_by == event.id
    ):
        return False  # another plan's, or late: the wait already ended
    if current == "paused":
        expected = book(plan).waiting_for
        if event.type != expected and event.type != PLAN_WAIT_TIMEOUT:
            logger.info(
                "plan %s waits for %s; %s leaves it paused", plan.plan_id, expected, event.type
            )
            return False

        def arrived(p: PlanContext) -> None:
            book(p).waiting_for = None
            book(p).wait_timeout = None
            book(p).resumed_by = event.id
            p.results[event.type] = event.data

        await plan.update(arrived)
        await plan.resume(event.data)
        return True
    if request is not None and event.type == request["response_event"]:

        def answered(p: PlanContext) -> None:
            still = dict(book(p).pending)
            still.pop(str(event.correlation_id), None)
            book(p).pending = still
            p.results[request["event_type"]] = event.data
            _steps.note_answer(p, str(event.correlation_id), event.id)

        await plan.update(answered)
    return True
