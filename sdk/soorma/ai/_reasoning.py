"""Reasoning: asking the models for a decision, repairing it, and the deterministic fallback.

Each model is asked, its answer parsed and validated against the event catalog; an
invalid answer is re-prompted with the errors (``repair_retries`` times) before the next
model is tried, and the deterministic fallback planner comes last. Every attempt leaves
an audit record.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soorma.ai._audit import (
    ATTEMPT_FALLBACK_MODEL,
    ATTEMPT_FALLBACK_PLANNER,
    ATTEMPT_FIRST,
    ATTEMPT_REPAIR,
)
from soorma.ai._catalog import EventCatalog
from soorma.ai._errors import LLMNotConfigured
from soorma.ai._llm import complete
from soorma.ai._models import ModelSettings
from soorma.ai._prompt import repair_messages, response_format
from soorma.ai._validation import parse_decision, validate_decision
from soorma_common.decisions import (
    CompleteAction,
    DelegateAction,
    PlannerAction,
    PlannerDecision,
    PublishAction,
    WaitAction,
)

if TYPE_CHECKING:
    from soorma.planning.plan import PlanContext
    from soorma_common.registry import EventDefinition


@dataclass(slots=True)
class DecisionRequest:
    """What a deterministic ``fallback_planner`` gets when the models failed.

    Attributes:
        trigger: What prompted the decision.
        plan: The plan (``None`` when reasoning without one).
        plan_id: The plan's id (or the id the decision is made for).
        current_state: The plan's current state.
        events: The actionable events (name -> registered definition).
        responses: For each actionable event, the events answering it.
        results: The plan's results so far.
        custom_context: The caller's runtime context.
        errors: Why the model attempts failed, oldest first.
    """

    trigger: str
    plan: PlanContext | None
    plan_id: str
    current_state: str
    events: dict[str, EventDefinition]
    responses: dict[str, list[str]]
    results: dict[str, Any]
    custom_context: dict[str, Any] | None
    errors: list[str] = field(default_factory=list)


FallbackResult = PlannerDecision | PlannerAction | Mapping[str, Any] | None
FallbackPlanner = Callable[[DecisionRequest], FallbackResult | Awaitable[FallbackResult]]
# (attempt kind, model, messages, raw output, latency ms, tokens, errors) -> audit record
Recorder = Callable[
    [
        str,
        str | None,
        list[dict[str, str]] | None,
        str | None,
        float | None,
        dict[str, int] | None,
        list[str],
    ],
    dict[str, Any],
]


# (model index, repair index, messages) -> HTTP headers for that model call (the
# idempotency key).
CallHeaders = Callable[[int, int, list[dict[str, str]]], Mapping[str, str]]


@dataclass(slots=True)
class Attempts:
    """What the attempts of one decision left: audit records and why each failed."""

    records: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    config_errors: list[LLMNotConfigured] = field(default_factory=list)


async def ask_models(
    *,
    models: Sequence[ModelSettings],
    repair_retries: int,
    temperature: float,
    options: Mapping[str, Any],
    messages: list[dict[str, str]],
    catalog: EventCatalog,
    plan_id: str,
    current_state: str,
    record: Recorder,
    attempts: Attempts,
    call_headers: CallHeaders | None = None,
) -> PlannerDecision | None:
    """The first valid decision from ``models`` in order, with repairs; else ``None``.

    ``call_headers(model index, repair index, messages)`` gives the headers of each call
    (the idempotency key of that attempt).
    """
    for index, spec in enumerate(models):
        model = spec.model
        attempt_messages = messages
        for repair in range(repair_retries + 1):
            kind = (
                ATTEMPT_REPAIR
                if repair
                else (ATTEMPT_FIRST if index == 0 else ATTEMPT_FALLBACK_MODEL)
            )
            try:
                answer = await complete(
                    model=model,
                    messages=attempt_messages,
                    response_format=response_format(),
                    api_key=spec.key(),
                    api_base=spec.api_base,
                    temperature=temperature,
                    options={**options, **spec.options},
                    headers=(
                        call_headers(index, repair, attempt_messages)
                        if call_headers is not None
                        else None
                    ),
                )
            except LLMNotConfigured as exc:
                attempts.config_errors.append(exc)
                attempts.failures.append(f"{model}: {exc.message}")
                attempts.records.append(
                    record(kind, model, attempt_messages, None, None, None, [exc.message])
                )
                break
            except Exception as exc:  # provider/network errors: try the next model
                error = f"{type(exc).__name__}: {exc}"
                attempts.failures.append(f"{model}: {error}")
                attempts.records.append(
                    record(kind, model, attempt_messages, None, None, None, [error])
                )
                break
            decision, errors = parse_decision(
                answer.content, plan_id=plan_id, current_state=current_state
            )
            if decision is not None:
                decision, errors = validate_decision(decision, catalog)
            attempts.records.append(
                record(
                    kind,
                    model,
                    attempt_messages,
                    answer.content,
                    answer.latency_ms,
                    answer.tokens,
                    errors,
                )
            )
            if decision is not None and not errors:
                return decision
            attempts.failures.append(f"{model} ({kind}): " + "; ".join(errors))
            attempt_messages = repair_messages(attempt_messages, answer.content, errors)
    return None


async def ask_fallback(
    fallback_planner: FallbackPlanner,
    request: DecisionRequest,
    catalog: EventCatalog,
    record: Recorder,
    attempts: Attempts,
) -> PlannerDecision | None:
    """The fallback planner's decision, validated like a model's; else ``None``."""
    try:
        produced = fallback_planner(request)
        if inspect.isawaitable(produced):
            produced = await produced
    except Exception as exc:
        error = f"fallback planner raised {type(exc).__name__}: {exc}"
        attempts.failures.append(error)
        attempts.records.append(
            record(ATTEMPT_FALLBACK_PLANNER, None, None, None, None, None, [error])
        )
        return None
    if produced is None:
        attempts.failures.append("fallback planner had no decision")
        attempts.records.append(
            record(ATTEMPT_FALLBACK_PLANNER, None, None, None, None, None, ["no decision"])
        )
        return None
    decision, errors = as_decision(produced, request.plan_id, request.current_state)
    if decision is not None:
        decision, errors = validate_decision(decision, catalog)
    raw = decision.model_dump_json() if decision is not None else repr(produced)
    attempts.records.append(record(ATTEMPT_FALLBACK_PLANNER, None, None, raw, None, None, errors))
    if errors:
        attempts.failures.append("fallback planner: " + "; ".join(errors))
        return None
    return decision


def as_decision(
    produced: object, plan_id: str, current_state: str
) -> tuple[PlannerDecision | None, list[str]]:
    """A fallback planner's answer (decision, action or dict) as a decision."""
    if isinstance(produced, PlannerDecision):
        return produced.model_copy(update={"plan_id": plan_id, "current_state": current_state}), []
    if isinstance(produced, PublishAction | CompleteAction | WaitAction | DelegateAction):
        return PlannerDecision(
            plan_id=plan_id,
            current_state=current_state,
            next_action=produced,
            reasoning="deterministic fallback planner",
        ), []
    if isinstance(produced, Mapping):
        return parse_decision(
            json.dumps(dict(produced), default=str), plan_id=plan_id, current_state=current_state
        )
    return None, [f"fallback planner returned {type(produced).__name__}, not a decision"]
