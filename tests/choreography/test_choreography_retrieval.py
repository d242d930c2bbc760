"""ChoreographyPlanner retrieval: long-term memory in the prompt, its ids in the audit.

The memory service is the real one (deterministic embedder); the model answers through
litellm's ``mock_response``, so the prompt the planner built is the one in the audit.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from choreo_helpers import SEARCH_SCHEMA, complete, register_worker

from soorma import PlatformContext
from soorma.ai import Retrieval
from soorma.ai._retrieval import SECTION_TITLE, format_section
from soorma.ai.choreography import ChoreographyPlanner
from soorma_common.events import EventEnvelope
from testsupport.services import event_settings, memory_settings, registry_settings

MODEL = "gpt-4o-mini"
EMBEDDING_MODEL = "deterministic/256"


@pytest.fixture(params=["sqlite", "pgvector"])
def backends(request: pytest.FixtureRequest, tmp_path: Any) -> dict[str, Any]:
    """The stack of conftest.py, with long-term memory on SQLite or PostgreSQL + pgvector
    (the registry stays on SQLite) and the deterministic embedder."""
    if request.param == "sqlite":
        db = request.getfixturevalue("sqlite_url")
    else:
        db = request.getfixturevalue("pgvector_url")
    return {
        "event": event_settings(block_seconds=0.5),
        "memory": memory_settings(db, tmp_path, embedding_model=EMBEDDING_MODEL),
        "registry": registry_settings(f"sqlite+aiosqlite:///{tmp_path}/registry.db", tmp_path),
    }


@pytest_asyncio.fixture
async def pgvector_url(pgvector_server_url: str) -> AsyncIterator[str]:
    import asyncpg

    name = f"soorma_cr_{uuid.uuid4().hex[:12]}"
    admin_url = pgvector_server_url.format(database="postgres").replace("+asyncpg", "")
    admin = await asyncpg.connect(admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    yield pgvector_server_url.format(database=name)
    admin = await asyncpg.connect(admin_url)
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.close()


ANSWER = {"mock_response": json.dumps(complete({"answer": "5 business days"}))}


def refund_goal() -> EventEnvelope:
    return EventEnvelope(
        source="client",
        type="support.question",
        topic="action-requests",
        data={"question": "How long does a refund take?"},
        correlation_id="goal-1",
        response_event="support.answer",
    )


async def remember(context: PlatformContext) -> dict[str, str]:
    """Knowledge, a procedure and an episode the refund question should retrieve, plus
    unrelated knowledge that should rank below."""
    memory = context.memory
    refund = await memory.knowledge.add(
        "A refund takes 5 business days after the returned parcel arrives.",
        tags=["billing"],
        source="faq.md",
    )
    await memory.knowledge.add("The office cafeteria serves lunch from noon.", source="hr.md")
    rule = await memory.procedures.add(
        "Quote the order id in every refund answer.",
        situation="a customer asks how long a refund takes",
        agent_id="support-planner",
    )
    episode = await memory.episodes.log(
        "support-planner", "user", "I asked about a refund for order 1042 last week."
    )
    return {"knowledge": refund.id, "procedure": rule.id, "episode": episode.id}


@pytest.mark.asyncio
async def test_retrieval_puts_a_labelled_bounded_section_in_the_prompt_and_ids_in_the_audit(
    context: PlatformContext,
):
    ids = await remember(context)
    planner = ChoreographyPlanner(
        name="support-planner",
        reasoning_model=MODEL,
        retrieval=Retrieval(knowledge=1, procedures=3, episodes=5, max_chars=1500),
    )
    await register_worker(
        context, name="searcher", consumes="kb.search", produces="kb.found", schema=SEARCH_SCHEMA
    )
    plan = await planner.open_plan(refund_goal(), context)

    await planner.reason_next_action(
        "new goal: refund question", context, plan=plan, llm_options=ANSWER
    )

    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None
    (record,) = stored.bookkeeping.choreography.audit
    prompt = record["prompt"][1]["content"]
    section = prompt[prompt.index(SECTION_TITLE) :].split("\n\nAvailable events:")[0]
    assert len(section) <= 1500
    assert "## Procedures that apply" in section and "## Knowledge" in section
    assert "## Past interactions with this user" in section
    assert f"[{ids['knowledge']}]" in section and "5 business days" in section
    assert f"[{ids['procedure']}]" in section and "Quote the order id" in section
    assert f"[{ids['episode']}]" in section and "order 1042" in section
    assert "cafeteria" not in section  # knowledge=1: only the best hit
    assert record["retrieved"] == {
        "knowledge": [ids["knowledge"]],
        "procedures": [ids["procedure"]],
        "episodes": [ids["episode"]],
    }


@pytest.mark.asyncio
async def test_without_the_option_the_planner_retrieves_nothing(context: PlatformContext):
    await remember(context)
    planner = ChoreographyPlanner(name="support-planner", reasoning_model=MODEL)
    plan = await planner.open_plan(refund_goal(), context)

    await planner.reason_next_action("new goal", context, plan=plan, llm_options=ANSWER)

    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None
    (record,) = stored.bookkeeping.choreography.audit
    assert SECTION_TITLE not in record["prompt"][1]["content"]
    assert "retrieved" not in record


@pytest.mark.asyncio
async def test_another_users_private_memory_is_not_retrieved(context: PlatformContext):
    other = PlatformContext.from_env(
        settings=dataclasses.replace(context.settings, user_id="someone-else")
    )
    async with other:
        await other.memory.knowledge.add("A refund takes 30 days for someone else's order.")
    planner = ChoreographyPlanner(
        name="support-planner", reasoning_model=MODEL, retrieval=Retrieval()
    )
    plan = await planner.open_plan(refund_goal(), context)

    await planner.reason_next_action("new goal", context, plan=plan, llm_options=ANSWER)

    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None
    (record,) = stored.bookkeeping.choreography.audit
    assert "30 days" not in record["prompt"][1]["content"]
    assert record["retrieved"] == {"knowledge": [], "procedures": [], "episodes": []}


def test_section_stays_within_max_chars_and_lists_only_the_ids_it_shows():
    long = "x" * 5000
    retrieved = format_section(
        400,
        procedures=[("p1", "short rule")],
        knowledge=[("k1", long), ("k2", long), ("k3", long)],
        episodes=[("e1", "hello")],
    )
    assert len(retrieved.section) <= 400
    assert retrieved.ids["procedures"] == ["p1"] and retrieved.ids["episodes"] == ["e1"]
    assert retrieved.ids["knowledge"] == ["k1"]  # cut to fit; the others left out
    for item_id in ("p1", "k1", "e1"):
        assert f"[{item_id}]" in retrieved.section
    assert "[k2]" not in retrieved.section


def test_nothing_found_means_no_section():
    retrieved = format_section(4000, procedures=[], knowledge=[], episodes=[])
    assert retrieved.section == ""
    assert retrieved.ids == {"knowledge": [], "procedures": [], "episodes": []}


def test_retrieval_options_are_checked():
    with pytest.raises(ValueError, match="knowledge must be at most 50"):
        Retrieval(knowledge=51)
    with pytest.raises(ValueError, match="max_chars"):
        Retrieval(max_chars=10)
    with pytest.raises(TypeError, match=r"soorma\.ai\.Retrieval"):
        ChoreographyPlanner(name="p", retrieval={"knowledge": 5})  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_min_score_cuts_dissimilar_memory_but_not_hybrid_knowledge(context: PlatformContext):
    ids = await remember(context)
    unrelated = await context.memory.procedures.add(
        "Water the office plants on Fridays.",
        situation="the plants look dry",
        agent_id="support-planner",
    )
    planner = ChoreographyPlanner(
        name="support-planner",
        reasoning_model=MODEL,
        retrieval=Retrieval(knowledge=1, procedures=3, episodes=0, min_score=0.2),
    )
    plan = await planner.open_plan(refund_goal(), context)

    await planner.reason_next_action("new goal", context, plan=plan, llm_options=ANSWER)

    stored = await context.memory.get_plan_context(plan.plan_id)
    assert stored is not None
    (record,) = stored.bookkeeping.choreography.audit
    # The hybrid knowledge hit scores ~0.03 (rank fusion) and is kept; the procedure about
    # plants shares no word with the goal and is cut.
    assert record["retrieved"]["knowledge"] == [ids["knowledge"]]
    assert ids["procedure"] in record["retrieved"]["procedures"]
    assert unrelated.id not in record["retrieved"]["procedures"]
    assert record["retrieved"]["episodes"] == []
