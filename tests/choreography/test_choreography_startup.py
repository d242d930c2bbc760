"""ChoreographyPlanner configuration checks and plans that cannot be decided at all."""

from __future__ import annotations

import pytest
from choreo_helpers import ScriptedLLM

from soorma import PlatformContext
from soorma.ai import ChoreographyPlanner, LLMNotConfigured
from soorma_common.events import EventEnvelope


def test_check_llm_configured_names_the_missing_key(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    planner = ChoreographyPlanner(name="p", reasoning_model="gpt-4o-mini")
    with pytest.raises(LLMNotConfigured, match="set the OPENAI_API_KEY environment variable"):
        planner.check_llm_configured()


def test_check_llm_configured_passes_with_a_key_a_usable_fallback_or_a_mock(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ChoreographyPlanner(
        name="p", reasoning_model="gpt-4o-mini", api_key="sk-test"
    ).check_llm_configured()
    ChoreographyPlanner(
        name="p", reasoning_model="gpt-4o-mini", fallback_models=["ollama/llama3"]
    ).check_llm_configured()
    ChoreographyPlanner(
        name="p", reasoning_model="gpt-4o-mini", mock_response="{}"
    ).check_llm_configured()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ChoreographyPlanner(name="p", reasoning_model="gpt-4o-mini").check_llm_configured()


@pytest.mark.asyncio
async def test_step_without_a_registry_fails_the_plan_instead_of_leaving_it_running(
    context: PlatformContext, llm: ScriptedLLM
):
    planner = ChoreographyPlanner(name="p", reasoning_model="scripted/planner")
    goal = EventEnvelope(
        source="client",
        type="research.goal",
        topic="action-requests",
        data={"topic": "x"},
        correlation_id="goal-1",
        response_event="research.done",
    )
    plan = await planner.open_plan(goal, context)
    blind = PlatformContext(bus=context.bus, memory=context.memory, registry=None)

    assert await planner.step(plan, blind, trigger="new goal") is None

    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None and stored.status == "failed"
    assert "needs context.registry" in stored.bookkeeping.failure_reason
    assert llm.calls == []  # nothing to decide with: the model was never asked
