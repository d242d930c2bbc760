"""The planner's prompt: strategy, business rules, plan state and the events it may use."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from soorma.ai._catalog import EventCatalog
from soorma_common.decisions import PlannerDecision

STRATEGIES: dict[str, str] = {
    "conservative": (
        "Strategy: conservative. Prioritise safety and compliance over speed. When unsure, "
        "or before anything irreversible, WAIT for human review."
    ),
    "balanced": (
        "Strategy: balanced. Balance speed and safety. WAIT only for high-risk decisions."
    ),
    "aggressive": (
        "Strategy: aggressive. Prioritise speed and automation. Avoid WAIT unless a rule "
        "requires it."
    ),
}

DEFAULT_SYSTEM_INSTRUCTIONS = "You are planning the next step of a workflow."

# Plan results in the prompt are trimmed: a big worker answer must not crowd out the
# event list the model has to choose from.
MAX_RESULTS_CHARS = 6000

_RULES = """\
Decide the single next action:
- publish: send one of the available events (event_type, data matching its payload schema,
  response_event = the event its consumer answers with). Its answer comes back to you.
- complete: the goal is met; result is the final answer returned to whoever asked.
- wait: pause until an external event (expected_event, a registered event) arrives.
- delegate: hand a sub-goal to another planner (target_planner, goal_event, goal_data).
Use only the events listed. Never repeat a step whose result is already in the results.
Answer with exactly one JSON object matching this JSON Schema and nothing else:"""


@lru_cache(maxsize=1)
def decision_schema() -> dict[str, Any]:
    """The PlannerDecision JSON Schema sent as the structured-output format."""
    return PlannerDecision.model_json_schema()


def response_format() -> dict[str, Any]:
    """litellm/OpenAI ``response_format`` asking for a PlannerDecision object."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "PlannerDecision", "schema": decision_schema()},
    }


def _compact(value: Any, limit: int) -> str:
    text = json.dumps(value, default=str, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + "...(truncated)"


def _event_listing(catalog: EventCatalog) -> str:
    from soorma.ai.toolkit import EventToolkit

    if not catalog.actionable:
        return "(no live agent consumes any event: you can only complete, wait or fail)"
    blocks = []
    for name in catalog.names():
        block = EventToolkit.format_for_llm([catalog.actionable[name]])
        # Sorted: the same trigger asked again gets the same prompt, whatever order
        # the registry listed its agents in.
        consumers = sorted(catalog.consumers.get(name, []))
        answers = sorted(catalog.responses.get(name, []))
        if consumers:
            block += f"\n  handled by: {', '.join(consumers)}"
        if answers:
            block += f"\n  answered with: {', '.join(answers)}"
        blocks.append(block)
    return "\n".join(blocks)


def build_messages(
    *,
    trigger: str,
    catalog: EventCatalog,
    strategy: str,
    system_instructions: str | None,
    plan_summary: Mapping[str, Any] | None,
    custom_context: Mapping[str, Any] | None,
    memory_section: str | None = None,
) -> list[dict[str, str]]:
    """The chat messages for one decision (``memory_section``: what the planner's
    retrieval found, already labelled and bounded)."""
    system = "\n\n".join(
        [
            system_instructions.strip() if system_instructions else DEFAULT_SYSTEM_INSTRUCTIONS,
            STRATEGIES[strategy],
            "You are the planner of an event-driven system: agents never call each other, "
            "they react to events. You choose which event happens next.",
        ]
    )
    parts = [f"Trigger: {trigger}"]
    if plan_summary:
        parts.append("Plan:\n" + _compact(dict(plan_summary), MAX_RESULTS_CHARS))
    if custom_context:
        parts.append(
            "Additional context (consider it when deciding):\n"
            + json.dumps(dict(custom_context), indent=2, default=str, sort_keys=True)
        )
    if memory_section:
        parts.append(memory_section)
    parts.append("Available events:\n" + _event_listing(catalog))
    parts.append(_RULES + "\n" + json.dumps(decision_schema(), separators=(",", ":")))
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def repair_messages(
    messages: list[dict[str, str]], raw: str, errors: list[str]
) -> list[dict[str, str]]:
    """``messages`` plus the invalid answer and what was wrong with it."""
    problems = "\n".join(f"- {e}" for e in errors)
    return [
        *messages,
        {"role": "assistant", "content": raw},
        {
            "role": "user",
            "content": (
                f"That decision is invalid:\n{problems}\nReturn a corrected JSON object "
                "(only the JSON) that fixes every problem."
            ),
        },
    ]


__all__ = [
    "DEFAULT_SYSTEM_INSTRUCTIONS",
    "STRATEGIES",
    "build_messages",
    "decision_schema",
    "repair_messages",
    "response_format",
]
