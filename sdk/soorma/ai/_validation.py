"""Parsing a model's answer into a PlannerDecision and checking it against the registry.

Nothing the model says is executed before it passes here: every event it names must be
registered (and consumed by a live agent when it is published), and every payload must
match the event's registered JSON Schema. The errors are worded for the model, because
they are sent back to it in the repair prompt.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from soorma._payload import payload_errors
from soorma.ai._catalog import EventCatalog
from soorma_common.decisions import DelegateAction, PlannerDecision, PublishAction, WaitAction

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def _extract_json(raw: str) -> Any:
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    # Models sometimes wrap the object in prose: take the outermost {...}.
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end <= start:
        raise ValueError("the answer contains no JSON object") from None
    try:
        return json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not valid JSON: {exc.msg} at char {exc.pos}") from None


def parse_decision(
    raw: str, *, plan_id: str, current_state: str
) -> tuple[PlannerDecision | None, list[str]]:
    """Parse ``raw`` model output.

    ``plan_id`` and ``current_state`` are the planner's, whatever the model wrote: the
    model cannot know (or change) which plan it is deciding for.

    Returns:
        The decision and ``[]``, or ``None`` and the reasons it could not be parsed.
    """
    try:
        obj = _extract_json(raw)
    except ValueError as exc:
        return None, [str(exc)]
    if not isinstance(obj, dict):
        return None, ["the answer must be one JSON object matching the PlannerDecision schema"]
    obj["plan_id"] = plan_id
    obj["current_state"] = current_state
    obj.setdefault("reasoning", "")
    try:
        return PlannerDecision.model_validate(obj), []
    except ValidationError as exc:
        errors = []
        for err in exc.errors()[:10]:
            where = ".".join(str(p) for p in err["loc"]) or "$"
            errors.append(f"{where}: {err['msg']}")
        return None, errors


def _check_payload(prefix: str, event_name: str, schema: Any, data: Any) -> list[str]:
    return [
        f"{prefix} of {event_name!r}: field {e['field']!r}: {e['error']}"
        for e in payload_errors(schema, data)
    ]


def _response_event(
    given: str | None, request: str, catalog: EventCatalog, what: str
) -> tuple[str | None, list[str]]:
    answers = catalog.responses.get(request, [])
    if given:
        if answers and given not in answers:
            return given, [
                f"{what}: {request!r} is answered with {answers}, not {given!r}; "
                "set response_event to one of those"
            ]
        return given, []
    if len(answers) == 1:
        return answers[0], []
    if answers:
        return None, [f"{what}: set response_event to one of {answers}"]
    return None, [
        f"{what}: no agent declares the event answering {request!r}; set response_event "
        "to the event type the answer should have"
    ]


def validate_decision(
    decision: PlannerDecision, catalog: EventCatalog
) -> tuple[PlannerDecision, list[str]]:
    """Check ``decision.next_action`` against the registry.

    Fills what the registry knows and the model may leave out (the event's registered
    topic, a responder's only answer event).

    Returns:
        The (possibly completed) decision and its errors (``[]`` when valid).
    """
    action = decision.next_action
    errors: list[str] = []
    update: dict[str, Any] = {}
    if isinstance(action, PublishAction):
        definition = catalog.actionable.get(action.event_type)
        if definition is None:
            return decision, [
                f"event_type {action.event_type!r} does not exist or no live agent consumes "
                f"it; use one of {catalog.names()}"
            ]
        if "topic" not in action.model_fields_set:
            update["topic"] = definition.topic
        elif action.topic != definition.topic:
            errors.append(
                f"{action.event_type!r} is published on topic {definition.topic!r}, "
                f"not {action.topic!r}"
            )
        errors += _check_payload("data", action.event_type, definition.payload_schema, action.data)
        response, problems = _response_event(
            action.response_event, action.event_type, catalog, "publish"
        )
        errors += problems
        update["response_event"] = response
    elif isinstance(action, DelegateAction):
        definition = catalog.actionable.get(action.goal_event)
        if definition is None:
            return decision, [
                f"goal_event {action.goal_event!r} does not exist or no live planner consumes "
                f"it; use one of {catalog.names()}"
            ]
        consumers = catalog.consumers.get(action.goal_event, [])
        if action.target_planner not in consumers:
            errors.append(
                f"target_planner {action.target_planner!r} does not handle "
                f"{action.goal_event!r}; it is handled by {consumers}"
            )
        errors += _check_payload(
            "goal_data", action.goal_event, definition.payload_schema, action.goal_data
        )
        response, problems = _response_event(
            action.response_event, action.goal_event, catalog, "delegate"
        )
        errors += problems
        update["response_event"] = response
    elif isinstance(action, WaitAction) and catalog.get(action.expected_event) is None:
        errors.append(
            f"expected_event {action.expected_event!r} is not a registered event; register "
            f"it or wait for one of {sorted(catalog.registered)}"
        )
    if update:
        decision = decision.model_copy(update={"next_action": action.model_copy(update=update)})
    return decision, errors


__all__ = ["parse_decision", "validate_decision"]
