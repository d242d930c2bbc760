"""One trigger, one step: a choreography plan's decisions, recorded by triggering event.

A planner step is keyed by the event that triggered it (the goal, an answer, the event
that ended a WAIT). The decision and the requests it sends (full envelopes: event ids
and correlation ids) are stored in the plan *before* anything is published. When the
trigger is delivered again (the process died before its ack) the step is found and the
recorded requests that are still unanswered are published again under the same event
ids, so consumers can drop the copy; the model is not asked again.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from soorma._propagation import current_event
from soorma.ai._keys import book
from soorma_common.decisions import PlannerDecision

if TYPE_CHECKING:
    from soorma.planning.plan import PlanContext

# Steps remembered per plan (oldest dropped first); a plan takes at most max_actions.
STEP_MEMORY = 200
_NAMESPACE = uuid.UUID("d7f4b1a2-6c1e-4a8e-9d35-2f0c8e1b7a44")


def step_key(explicit: str | None = None) -> str | None:
    """The key of the step being taken: ``explicit``, else the handled event's id."""
    if explicit:
        return explicit
    handled = current_event()
    return None if handled is None else handled.id


def derived_id(plan_id: str, key: str, part: str) -> str:
    """A stable id for something a step sends (same plan, trigger and part: same id)."""
    return str(uuid.uuid5(_NAMESPACE, f"{plan_id}/{key}/{part}"))


def model_call_key(
    plan_id: str,
    key: str,
    model_index: int,
    repair: int,
    messages: Sequence[Mapping[str, Any]],
) -> str:
    """The idempotency key of one model call of a step.

    The same plan, trigger and attempt (which model, which repair) with the same prompt
    always get the same key, in any process: a trigger asked again after a crash sends
    the key it sent the first time, so a provider or gateway that honours the key bills
    the call once. The prompt is part of the key because a key must never be reused for
    another request body (gateways following the IETF Idempotency-Key draft reject that
    with 422): a re-ask whose prompt changed (the plan moved on meanwhile) is another call.
    """
    prompt = hashlib.sha256(
        json.dumps(list(messages), sort_keys=True, default=str).encode()
    ).hexdigest()[:32]
    return derived_id(plan_id, key, f"model/{model_index}/{repair}/{prompt}")


def recorded_step(plan: PlanContext, key: str | None) -> dict[str, Any] | None:
    """The step recorded for ``key`` in ``plan``, if any."""
    if key is None:
        return None
    found = book(plan).steps.get(key)
    return found if isinstance(found, dict) else None


def record_step(
    plan: PlanContext, key: str, decision: PlannerDecision, events: list[dict[str, Any]]
) -> None:
    """Record (in the local copy) that ``key``'s step took ``decision`` and sends ``events``.

    Pure: called inside ``plan.update``, which re-runs it after a conflicting write.
    """
    steps = dict(book(plan).steps)
    steps[key] = {"decision": decision.model_dump(mode="json"), "events": events}
    while len(steps) > STEP_MEMORY:
        steps.pop(next(iter(steps)))
    book(plan).steps = steps


def recorded_decision(step: dict[str, Any]) -> PlannerDecision:
    """The decision a recorded step took."""
    return PlannerDecision.model_validate(step["decision"])


def note_answer(plan: PlanContext, correlation_id: str, answer_id: str) -> None:
    """Remember which event answered a request (later, different answers are dropped)."""
    book(plan).answered = {**book(plan).answered, correlation_id: answer_id}


def answered_by(plan: PlanContext, correlation_id: str | None) -> str | None:
    """The id of the event that answered the request ``correlation_id``, if any."""
    if not correlation_id:
        return None
    value = book(plan).answered.get(correlation_id)
    return None if value is None else str(value)


__all__ = [
    "answered_by",
    "derived_id",
    "model_call_key",
    "note_answer",
    "record_step",
    "recorded_decision",
    "recorded_step",
    "step_key",
]
