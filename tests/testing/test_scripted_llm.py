"""ScriptedLLM: ChoreographyPlanner decisions from a script, through litellm and validation."""

from __future__ import annotations

from typing import Any

import pytest

from soorma import Tool
from soorma.ai import ChoreographyPlanner
from soorma.testing import LLMCall, PlatformHarness
from soorma_common.decisions import CompleteAction, PlannerDecision
from soorma_common.registry import AgentCapability, EventDefinition

pytestmark = pytest.mark.asyncio

KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_API_KEY", "GEMINI_API_KEY")
LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {"word": {"type": "string", "minLength": 1}},
    "required": ["word"],
}


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)


def dictionary() -> Tool:
    tool = Tool(
        name="dictionary",
        capabilities=[
            AgentCapability(
                task_name="lookup",
                description="Defines a word.",
                consumed_event=EventDefinition(
                    event_name="word.lookup.requested",
                    description="Define a word",
                    payload_schema=LOOKUP_SCHEMA,
                ),
                produced_events=[
                    EventDefinition(event_name="word.lookup.completed", topic="action-results")
                ],
            )
        ],
    )

    @tool.on_invoke("word.lookup.requested")
    async def lookup(request: Any, context: Any) -> dict[str, str]:
        return {"definition": f"{request.data['word']}: a word"}

    return tool


def planner(**options: Any) -> ChoreographyPlanner:
    agent = ChoreographyPlanner(
        name="definer", reasoning_model="gpt-4o-mini", temperature=0, **options
    )

    @agent.on_goal("define.goal")
    async def on_goal(goal: Any, context: Any) -> None:
        plan = await agent.open_plan(goal, context)
        await agent.step(plan, context, trigger=f"new goal: {goal.data}")

    @agent.on_transition()
    async def on_transition(transition: Any, context: Any) -> None:
        await agent.step(transition.plan, context, trigger=f"{transition.event.type} arrived")

    return agent


LOOKUP = {
    "action": "publish",
    "event_type": "word.lookup.requested",
    "data": {"word": "owl"},
    "reasoning": "look it up",
}


async def test_a_scripted_list_drives_the_plan_through_the_real_validation():
    agent = planner()
    async with PlatformHarness() as platform:
        llm = platform.script(
            agent,
            [
                LOOKUP,
                {
                    "reasoning": "done",
                    "next_action": {"action": "complete", "result": {"answer": "owl: a word"}},
                },
            ],
        )
        await platform.start(dictionary(), agent)
        answer = await platform.call("define.goal", {"word": "owl"}, response_event="define.done")
        plan = await platform.plan(correlation_id=answer.correlation_id)
    assert answer.data["status"] == "completed"
    assert answer.data["result"] == {"answer": "owl: a word"}
    assert agent.reasoning_model == llm.model and llm.remaining == 0
    first, second = llm.calls
    assert first.trigger == "new goal: {'word': 'owl'}" and not first.repair
    assert "word.lookup.requested" in first.messages[-1]["content"]  # the registry's catalog
    assert second.trigger == "word.lookup.completed arrived"
    assert second.plan_id == plan.plan_id
    assert second.results["word.lookup.requested"]["result"] == {"definition": "owl: a word"}
    # The planner audited both calls as valid first attempts on the scripted model.
    audit = plan.bookkeeping.choreography.audit
    assert [(r["attempt"], r["model"], r["valid"]) for r in audit] == [
        ("first", llm.model, True)
    ] * 2
    assert [e.type for e in platform.events(source="definer", topic="action-*")] == [
        "word.lookup.requested",
        "define.done",
    ]


async def test_a_callable_script_decides_from_the_stored_plan():
    def decide(call: LLMCall) -> Any:
        if "word.lookup.requested" not in call.results:
            return {**LOOKUP, "data": {"word": call.goal_data["word"]}}
        definition = call.results["word.lookup.requested"]["result"]["definition"]
        return PlannerDecision(
            plan_id="ignored",
            current_state="ignored",
            reasoning="done",
            next_action=CompleteAction(result={"answer": definition}, reasoning="done"),
        )

    agent = planner()
    async with PlatformHarness() as platform:
        llm = platform.script(agent, decide)
        await platform.start(dictionary(), agent)
        answer = await platform.call("define.goal", {"word": "heron"}, response_event="define.done")
    assert answer.data["result"] == {"answer": "heron: a word"}
    assert [c.index for c in llm.calls] == [0, 1]
    assert llm.calls[0].plan is not None and llm.calls[0].plan.goal_data == {"word": "heron"}


async def test_an_invalid_answer_is_repaired_with_the_next_scripted_answer():
    agent = planner()
    async with PlatformHarness() as platform:
        llm = platform.script(
            agent,
            [
                {**LOOKUP, "data": {}},  # breaks the registered schema: "word" is required
                LOOKUP,
                {"action": "complete", "result": {"ok": True}, "reasoning": "done"},
            ],
        )
        await platform.start(dictionary(), agent)
        answer = await platform.call("define.goal", {}, response_event="define.done")
        plan = await platform.plan(correlation_id=answer.correlation_id)
    assert answer.data["status"] == "completed"
    assert [c.repair for c in llm.calls] == [False, True, False]
    assert "'word' is a required property" in llm.calls[1].messages[-1]["content"]
    assert [(r["attempt"], r["valid"]) for r in plan.bookkeeping.choreography.audit] == [
        ("first", False),
        ("repair", True),
        ("first", True),
    ]


async def test_a_script_that_runs_out_fails_the_plan_and_says_why():
    agent = planner()
    agent.repair_retries = 0
    async with PlatformHarness() as platform:
        platform.script(agent, [LOOKUP])
        await platform.start(dictionary(), agent)
        answer = await platform.call("define.goal", {"word": "owl"}, response_event="define.done")
    assert answer.data["status"] == "failed"
    assert "the scripted LLM has no answer left" in answer.data["error"]


async def test_scripted_text_and_errors_reach_the_planner_as_a_model_would_send_them():
    async with PlatformHarness() as platform:
        llm = platform.scripted_llm(["not json at all"])
        failing = platform.scripted_llm([RuntimeError("rate limited")])
        agent = planner(repair_retries=0, fallback_models=[llm.model, failing.model])
        await platform.start(dictionary(), agent)
        answer = await platform.call("define.goal", {"word": "owl"}, response_event="define.done")
    # No key for gpt-4o-mini: reported as such; then the two scripted models' answers.
    assert answer.data["status"] == "failed"
    error = answer.data["error"]
    assert "OPENAI_API_KEY" in error
    assert "the answer contains no JSON object" in error
    assert "RuntimeError: rate limited" in error


async def test_a_wait_decision_pauses_the_plan_until_the_test_sends_the_expected_event():
    agent = planner()
    async with PlatformHarness() as platform:
        llm = platform.script(
            agent,
            [
                {"action": "wait", "reason": "needs approval", "expected_event": "approval.given"},
                lambda call: {
                    "action": "complete",
                    "result": {"approved": call.results["approval.given"]["ok"]},
                },
            ],
        )
        # The model may only wait for an event the registry knows.
        await platform.context.registry.register_event(
            EventDefinition(event_name="approval.given", topic="action-results")
        )
        await platform.start(agent)
        pending = await platform.request("define.goal", {}, response_event="define.done")
        waiting = await platform.wait_for_event("plan.waiting_for_input")
        paused = await platform.plan(waiting.data["plan_id"])
        assert paused is not None and paused.status == "paused"
        await platform.publish(
            "action-results",
            "approval.given",
            {"ok": True},
            correlation_id=waiting.correlation_id,
            plan_id=waiting.data["plan_id"],
        )
        answer = await pending
    assert answer.data["result"] == {"approved": True}
    assert len(llm.calls) == 2


async def test_a_wait_that_times_out_names_the_plan_that_failed_and_why():
    agent = planner()
    agent.repair_retries = 0
    async with PlatformHarness() as platform:
        # "approval.given" is not registered: the planner rejects the decision.
        platform.script(
            agent,
            [{"action": "wait", "reason": "needs approval", "expected_event": "approval.given"}],
        )
        await platform.start(agent)
        await platform.request("define.goal", {}, response_event="define.done")
        await platform.wait_for_event("plan.failed")
        with pytest.raises(
            TimeoutError,
            match=r"plans failed: .*: no valid decision .*"
            r"approval\.given",
        ):
            await platform.wait_for_event("plan.waiting_for_input", timeout=0.05)
