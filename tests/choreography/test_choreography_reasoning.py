"""ChoreographyPlanner reasoning: validation, repair, fallbacks, audit, configuration errors."""

from __future__ import annotations

import pytest
from choreo_helpers import (
    MODEL,
    SEARCH_SCHEMA,
    ScriptedLLM,
    complete,
    publish,
    register_event,
    register_worker,
    wait,
)

from soorma import PlatformContext
from soorma.ai._errors import CircuitBreakerOpen, DecisionInvalid, LLMNotConfigured
from soorma.ai.choreography import ChoreographyPlanner, DecisionRequest
from soorma_common.decisions import CompleteAction, PublishAction, WaitAction
from soorma_common.events import EventEnvelope
from testsupport import tenant_services

# One set of services for the module; each test is a tenant of its own on them.
pytestmark = pytest.mark.asyncio(loop_scope="module")
stack, context = tenant_services.stack, tenant_services.context


def goal_event() -> EventEnvelope:
    return EventEnvelope(
        source="client",
        type="research.goal",
        topic="action-requests",
        data={"topic": "event sourcing"},
        correlation_id="goal-1",
        response_event="research.done",
    )


async def make_plan(planner: ChoreographyPlanner, context: PlatformContext):
    await register_worker(
        context,
        name="searcher",
        consumes="web.search.requested",
        produces="web.search.completed",
        schema=SEARCH_SCHEMA,
    )
    return await planner.open_plan(goal_event(), context)


async def test_valid_decision_is_returned_with_registry_defaults_filled(
    context: PlatformContext, llm: ScriptedLLM
):
    planner = ChoreographyPlanner(name="p", reasoning_model=MODEL)
    plan = await make_plan(planner, context)
    llm.say(publish("web.search.requested", {"query": "event sourcing"}))

    decision = await planner.reason_next_action("new goal", context, plan=plan)

    action = decision.next_action
    assert isinstance(action, PublishAction)
    assert action.response_event == "web.search.completed"  # the responder's only answer
    assert action.topic == "action-requests"
    assert decision.plan_id == plan.plan_id
    assert len(llm.calls) == 1
    prompt = llm.calls[0]["messages"][1]["content"]
    assert "web.search.requested" in prompt and '"minLength":1' in prompt
    # The structured-output format is the PlannerDecision schema.
    fmt = llm.calls[0]["optional_params"]["response_format"]
    assert fmt["json_schema"]["name"] == "PlannerDecision"


async def test_prompt_carries_strategy_instructions_custom_context_and_results(
    context: PlatformContext, llm: ScriptedLLM
):
    planner = ChoreographyPlanner(
        name="p",
        reasoning_model=MODEL,
        planning_strategy="conservative",
        system_instructions="Orders above $5,000 need approval.",
    )
    plan = await make_plan(planner, context)
    await plan.update(lambda p: p.results.update({"web.search.requested": {"hits": 3}}))
    llm.say(complete({"answer": 42}))

    await planner.reason_next_action(
        "search done", context, plan=plan, custom_context={"customer": {"tier": "premium"}}
    )

    system, user = (m["content"] for m in llm.calls[0]["messages"])
    assert "Orders above $5,000 need approval." in system
    assert "conservative" in system
    assert '"tier": "premium"' in user
    assert '"hits":3' in user and "search done" in user


async def test_hallucinated_event_is_rejected_and_repaired(
    context: PlatformContext, llm: ScriptedLLM
):
    planner = ChoreographyPlanner(name="p", reasoning_model=MODEL, repair_retries=1)
    plan = await make_plan(planner, context)
    llm.say(
        publish("web.crawl.requested", {"url": "x"}),  # no such event
        publish("web.search.requested", {"query": "ok"}),
    )

    decision = await planner.reason_next_action("go", context, plan=plan)

    assert decision.next_action.event_type == "web.search.requested"
    repair_prompt = llm.calls[1]["messages"][-1]["content"]
    assert "'web.crawl.requested' does not exist" in repair_prompt
    audit = plan.bookkeeping.choreography.audit
    assert [(r["attempt"], r["valid"]) for r in audit] == [("first", False), ("repair", True)]


async def test_invalid_payload_is_rejected_and_repaired(context: PlatformContext, llm: ScriptedLLM):
    planner = ChoreographyPlanner(name="p", reasoning_model=MODEL)
    plan = await make_plan(planner, context)
    llm.say(
        publish("web.search.requested", {"q": "missing the query field"}),
        publish("web.search.requested", {"query": "fixed"}),
    )

    decision = await planner.reason_next_action("go", context, plan=plan)

    assert decision.next_action.data == {"query": "fixed"}
    repair_prompt = llm.calls[1]["messages"][-1]["content"]
    assert "field 'query'" in repair_prompt and "required" in repair_prompt


async def test_unparseable_answer_is_repaired(context: PlatformContext, llm: ScriptedLLM):
    planner = ChoreographyPlanner(name="p", reasoning_model=MODEL)
    plan = await make_plan(planner, context)
    llm.say("I think we should search the web!", complete({"ok": True}))

    decision = await planner.reason_next_action("go", context, plan=plan)

    assert isinstance(decision.next_action, CompleteAction)
    assert "no JSON object" in llm.calls[1]["messages"][-1]["content"]


async def test_exhausted_repairs_move_on_to_the_fallback_model(
    context: PlatformContext, llm: ScriptedLLM
):
    planner = ChoreographyPlanner(
        name="p",
        reasoning_model=MODEL,
        repair_retries=1,
        fallback_models=["scripted/backup"],
    )
    plan = await make_plan(planner, context)
    llm.say(
        publish("nope.requested", {}),
        publish("still.nope", {}),
        publish("web.search.requested", {"query": "from the backup"}),
    )

    decision = await planner.reason_next_action("go", context, plan=plan)

    assert decision.next_action.data == {"query": "from the backup"}
    assert [c["model"] for c in llm.calls] == ["planner", "planner", "backup"]
    assert [r["attempt"] for r in plan.bookkeeping.choreography.audit] == [
        "first",
        "repair",
        "fallback_model",
    ]


async def test_fallback_planner_decides_when_every_model_fails(
    context: PlatformContext, llm: ScriptedLLM
):
    seen: list[DecisionRequest] = []

    def rules(request: DecisionRequest) -> WaitAction:
        seen.append(request)
        return WaitAction(reason="models failed; ask a human", expected_event="human.answered")

    planner = ChoreographyPlanner(
        name="p", reasoning_model=MODEL, repair_retries=0, fallback_planner=rules
    )
    plan = await make_plan(planner, context)
    await register_event(context, "human.answered")
    llm.say(publish("nope", {}))

    decision = await planner.reason_next_action("go", context, plan=plan)

    assert isinstance(decision.next_action, WaitAction)
    assert "web.search.requested" in seen[0].events
    assert any("nope" in e for e in seen[0].errors)
    assert plan.bookkeeping.choreography.audit[-1]["attempt"] == "fallback_planner"


async def test_everything_exhausted_fails_the_plan_with_the_reason(
    context: PlatformContext, llm: ScriptedLLM
):
    planner = ChoreographyPlanner(
        name="p", reasoning_model=MODEL, repair_retries=1, fallback_planner=lambda request: None
    )
    plan = await make_plan(planner, context)
    llm.say(publish("nope", {}), publish("nope.again", {}))

    with pytest.raises(DecisionInvalid, match="no valid decision after 3 attempt"):
        await planner.reason_next_action("go", context, plan=plan)

    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None and stored.status == "failed"
    assert "nope.again" in stored.bookkeeping.failure_reason
    assert len(stored.bookkeeping.choreography.audit) == 3


async def test_audit_records_are_complete_and_redacted(context: PlatformContext, llm: ScriptedLLM):
    key = "sk-test-abcdefghijklmnopqrstuvwxyz123456"
    planner = ChoreographyPlanner(
        name="p",
        reasoning_model=MODEL,
        api_key="my-very-private-key",
        system_instructions=f"Use key {key} and header 'Authorization: Bearer abc.def.ghi123'",
    )
    plan = await make_plan(planner, context)
    llm.say(complete({"note": "done with api_key=supersecretvalue"}))

    await planner.reason_next_action("go", context, plan=plan)

    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None
    (record,) = stored.bookkeeping.choreography.audit
    assert record["model"] == MODEL and record["attempt"] == "first" and record["valid"]
    assert record["tokens"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    assert record["latency_ms"] >= 0 and record["raw_output"] and record["prompt"]
    text = str(record)
    for secret in (key, "Bearer abc.def.ghi123", "supersecretvalue"):
        assert secret not in text
    assert "[REDACTED]" in text


async def test_missing_provider_key_names_the_env_var(
    context: PlatformContext, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    await register_worker(context, name="w", consumes="a.requested", produces="a.done")
    for model, env_var in (
        ("gpt-4o", "OPENAI_API_KEY"),
        ("anthropic/claude-3-5-sonnet", "ANTHROPIC_API_KEY"),
    ):
        planner = ChoreographyPlanner(name="p", reasoning_model=model)
        with pytest.raises(LLMNotConfigured, match=env_var):
            await planner.reason_next_action("go", context)
    assert llm.calls == []


async def test_mock_response_needs_no_key(
    context: PlatformContext, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    await register_worker(context, name="w", consumes="a.requested", produces="a.done")
    planner = ChoreographyPlanner(
        name="p",
        reasoning_model="gpt-4o",
        mock_response='{"next_action": {"action": "publish", '
        '"event_type": "a.requested", "reasoning": "r"}, '
        '"reasoning": "r"}',
    )

    decision = await planner.reason_next_action("go", context)

    assert decision.next_action.response_event == "a.done"
    assert planner.audit_log[-1]["valid"]


async def test_circuit_breaker_holds_across_a_restart(context: PlatformContext, llm: ScriptedLLM):
    first = ChoreographyPlanner(name="p", reasoning_model=MODEL, max_actions=2)
    plan = await make_plan(first, context)
    for n in range(2):
        llm.say(publish("web.search.requested", {"query": f"q{n}"}))
        decision = await first.reason_next_action("go", context, plan=plan)
        await first.execute_decision(decision, context, plan=plan)

    # A new process: a new planner instance and nothing but the plan id.
    restarted = ChoreographyPlanner(name="p", reasoning_model=MODEL, max_actions=2)
    async with PlatformContext.from_env(settings=context.settings) as fresh:
        with pytest.raises(CircuitBreakerOpen, match="max_actions=2"):
            await restarted.reason_next_action("go again", fresh, plan_id=plan.plan_id)

    assert llm.calls and len(llm.calls) == 2  # the breaker tripped before asking the model
    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None and stored.status == "failed"
    assert "circuit breaker" in stored.bookkeeping.failure_reason


async def test_wait_for_an_unregistered_event_is_rejected(
    context: PlatformContext, llm: ScriptedLLM
):
    planner = ChoreographyPlanner(name="p", reasoning_model=MODEL, repair_retries=0)
    plan = await make_plan(planner, context)
    llm.say(wait("made.up.approval"))

    with pytest.raises(DecisionInvalid, match=r"made\.up\.approval"):
        await planner.reason_next_action("go", context, plan=plan)
