"""Each example's agents, tested in process with soorma.testing (no servers, no processes).

The process-level tests next to this file run the examples as documented; these load the
same modules and drive their agents through ``PlatformHarness``, the way an agent author
tests their own agents.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from soorma.testing import PlatformHarness

pytestmark = pytest.mark.asyncio

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_loaded: dict[Path, ModuleType] = {}


def load(example: str, filename: str) -> ModuleType:
    """Import ``examples/<example>/<filename>`` (its sibling modules importable), once."""
    path = EXAMPLES / example / filename
    if path not in _loaded:
        name = f"example_{example.replace('-', '_')}_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
        _loaded[path] = module
    return _loaded[path]


async def test_01_hello_world_tool_greets_and_refuses_a_too_long_name():
    hello = load("01-hello-world", "tool.py")
    async with PlatformHarness() as platform:
        await platform.start(hello.tool)
        answer = await platform.call(
            "greet.requested", {"name": "Ada"}, response_event="greet.completed"
        )
        refused = await platform.call(
            "greet.requested", {"name": "x" * 101}, response_event="greet.completed"
        )
    assert answer.data["result"] == {"greeting": "Hello, Ada!"}
    assert refused.data["success"] is False
    assert "name is too long" in refused.data["error"]


async def test_02_worker_fans_out_to_three_tools_and_aggregates():
    tools = load("02-worker-fanout", "tools.py")
    analyzer = load("02-worker-fanout", "worker.py")
    async with PlatformHarness() as platform:
        await platform.start(tools.sentiment, tools.entities, tools.topics, analyzer.worker)
        answer = await platform.call(
            "analyze.requested",
            {"text": "I love the new laptop from Acme, but the flight to Berlin was late."},
            response_event="analyze.completed",
        )
        blank = await platform.call(
            "analyze.requested", {"text": " "}, response_event="analyze.completed"
        )
        delegated = platform.events(source="text-analyzer", topic="action-requests")
    assert answer.data["result"] == {
        "entities": ["Acme", "Berlin"],
        "sentiment": {"label": "neutral", "score": 0},
        "topics": ["technology", "travel"],
    }
    assert blank.data["success"] is False
    assert blank.data["error"] == "data.text must be a non-empty string"
    # Three sub-tasks in parallel, for the one valid request only.
    assert sorted(e.type for e in delegated) == [
        "entity.extract",
        "sentiment.analyze",
        "topic.classify",
    ]


async def test_03_working_memory_worker_reads_the_record_the_event_only_names():
    planner = load("03-working-memory", "planner.py")
    checker = load("03-working-memory", "worker.py")
    plan_id, key = "maintenance-1", "plan:maintenance-1:vehicle"
    async with PlatformHarness() as platform:
        await platform.start(checker.worker)
        await platform.context.memory.store(key, planner.vehicle_record("V-42"), plan_id=plan_id)
        answer = await platform.call(
            "parts.check.requested",
            {"vehicle_id": "V-42", "plan_id": plan_id, "memory_key": key},
            response_event="parts.check.completed",
            plan_id=plan_id,
        )
        (request,) = platform.events("parts.check.requested")
    assert answer.data["result"] == {
        "vehicle_id": "V-42",
        "history_entries": 600,
        "in_stock": ["brake_pads", "wiper_blades"],
        "to_order": ["oil_filter"],
    }
    # The event carried the key, not the ~100 KB record.
    assert len(json.dumps(request.data)) < 300


async def test_04_state_machine_takes_each_branch_by_the_answers():
    planner = load("04-planner-state-machine", "planner.py")
    workers = load("04-planner-state-machine", "workers.py")
    async with PlatformHarness() as platform:
        await platform.start(workers.searcher, workers.analyzer, workers.user, planner.planner)
        outcomes = {}
        for topic in ("owls", "flaky", "obscure", "broken"):
            answer = await platform.call(
                "research.goal", {"topic": topic}, response_event="research.done"
            )
            plan = await platform.plan(correlation_id=answer.correlation_id)
            assert plan is not None and plan.plan_id == answer.data["plan_id"]
            outcomes[topic] = (answer.data["status"], list(plan.results))
    assert outcomes == {
        "owls": ("completed", ["searching", "analyzing", "final"]),
        "flaky": ("completed", ["searching", "retry_search", "analyzing", "final"]),
        "obscure": ("completed", ["searching", "ask_user", "analyzing", "final"]),
        "broken": ("failed", ["searching", "retry_search"]),
    }


async def test_05_choreography_planner_runs_fetch_analyze_report_on_scripted_decisions():
    workers = load("05-choreography", "workers.py")
    example = load("05-choreography", "planner.py")
    offline = sys.modules["offline"]  # the example's scripted "model", imported by planner.py
    async with PlatformHarness() as platform:
        llm = platform.scripted_llm(lambda call: offline.scripted_decision(call.plan))
        research = example.build_planner(llm.model, offline=False)
        await platform.start(workers.fetcher, workers.analyzer, workers.reporter, research)
        answer = await platform.call(
            "doc.research.requested",
            {"topic": "choreography of events"},
            response_event="doc.research.completed",
        )
        plan = await platform.plan(answer.data["plan_id"])
    assert answer.data["status"] == "completed"
    report = answer.data["result"]["report"]
    assert report.startswith("Report: choreography of events\n")
    assert "- In choreography no central conductor exists" in report
    steps = ["doc.fetch.requested", "doc.analyze.requested", "doc.report.requested"]
    assert plan is not None and set(plan.results) == {*steps, "final"}
    assert [(r["attempt"], r["valid"]) for r in plan.bookkeeping.choreography.audit] == [
        ("first", True)
    ] * 4
    assert [c.trigger.split(" ")[0] for c in llm.calls] == [
        "new",
        "doc.fetch.completed",
        "doc.analyze.completed",
        "doc.report.completed",
    ]


async def test_08_rag_agent_answers_from_what_retrieval_put_in_the_prompt():
    ingest = load("08-rag-agent", "ingest.py")
    example = load("08-rag-agent", "planner.py")
    answers = sys.modules["offline_answers"]  # imported by planner.py
    knowledge_line = re.compile(r"^- \[[^\]]+\] \(score [^,)]+(?:, source ([^)]+))?\) (.*)$")

    def from_the_prompt(call):
        # The scripted model sees only the prompt: it answers from the knowledge lines of
        # the "Retrieved memory" section, so the answer proves retrieval reached the model.
        prompt = call.messages[1]["content"]
        passages = [
            (m.group(1), m.group(2))
            for m in map(knowledge_line.match, prompt.splitlines())
            if m is not None
        ]
        return answers.decision(call.trigger.partition(": ")[2], passages)

    async with PlatformHarness(user_id="customer-7") as platform:
        await ingest.ingest(platform.context, ingest.DEFAULT_FILES)
        llm = platform.scripted_llm(from_the_prompt)
        planner = example.build_planner(llm.model, offline=False)
        await platform.start(planner)
        answer = await platform.call(
            "support.question.asked",
            {"question": "Where is the data stored?"},
            response_event="support.question.answered",
        )
        await platform.stop(planner)  # its handler logs the episodes after answering
        plan = await platform.plan(answer.data["plan_id"])
        episodes = await platform.context.memory.episodes.recent("nimbus-support")

    assert answer.data["status"] == "completed", answer.data
    assert "Frankfurt" in answer.data["result"]["answer"]
    assert answer.data["result"]["sources"] == ["security.md"]
    (record,) = plan.bookkeeping.choreography.audit
    assert record["retrieved"]["knowledge"] and record["retrieved"]["procedures"]
    assert [(e.role, e.plan_id) for e in episodes] == [
        ("user", plan.plan_id),
        ("assistant", plan.plan_id),
    ]
