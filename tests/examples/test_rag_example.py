"""examples/08-rag-agent runs as documented: ingest, planner and client as processes.

The planner runs ``--offline`` (litellm ``mock_response``, no key, no network) with
retrieval on; the memory service embeds with the deterministic test embedder.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from test_choreography_example import offline_env

from event_service import create_app as create_event_app
from event_service.settings import Settings as EventSettings
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from registry_service.settings import Settings as RegistrySettings
from soorma import PlatformContext, PlatformSettings
from testsupport.forkserver import PRELOAD_AI
from testsupport.server import serve
from testsupport.services import memory_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import Proc, soorma_run

pytestmark = pytest.mark.asyncio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "08-rag-agent"
DOCS = {"plans-and-billing.md", "sync.md", "security.md"}


@pytest_asyncio.fixture
async def services(sqlite_url: str, tmp_path: Any) -> AsyncIterator[dict[str, str]]:
    """Event, memory and registry services (embedded backends) under real uvicorn."""
    memory = memory_settings(sqlite_url, tmp_path, embedding_model="deterministic/256")
    registry = RegistrySettings(
        registry_database_url=f"sqlite+aiosqlite:///{tmp_path}/registry.db", data_dir=tmp_path
    )
    async with (
        serve(create_event_app(EventSettings(event_backend="memory"))) as events,
        serve(create_memory_app(memory)) as memories,
        serve(create_registry_app(registry)) as registrar,
    ):
        yield {
            "SOORMA_EVENT_SERVICE_URL": events.url,
            "SOORMA_MEMORY_URL": memories.url,
            "SOORMA_REGISTRY_URL": registrar.url,
            "SOORMA_USER_ID": "customer-7",
        }


async def ask(env: dict[str, str], question: str, planner: Proc) -> tuple[Proc, str]:
    client = await Proc.start(sys.executable, str(EXAMPLE / "client.py"), question, env=env)
    assert await client.wait(within=60) == 0, client.output + "\n--- planner\n" + planner.output
    last = client.lines[-1]
    assert last.startswith("plan ") and last.endswith(": completed"), last
    return client, last.removeprefix("plan ").removesuffix(": completed")


# Five processes start here (ingest, the soorma run supervisor and its agents, two
# clients), each importing the SDK and litellm: on a busy two-core machine that alone has
# taken over a minute.
@pytest.mark.timeout(300)
async def test_rag_agent_answers_from_ingested_docs_with_retrieval_in_prompt_and_audit(
    services: dict[str, str],
):
    env = offline_env(**services)
    ingest = await Proc.start(sys.executable, str(EXAMPLE / "ingest.py"), env=env)
    assert await ingest.wait(within=60) == 0, ingest.output
    assert "stored " in ingest.lines[-1] and "from 3 file(s) and 2 rule(s)" in ingest.lines[-1]

    # As the README runs it: `SUPPORT_MODEL=offline soorma run planner.py`.
    planner = await soorma_run(
        str(EXAMPLE / "planner.py"), env={**env, "SUPPORT_MODEL": "offline"}, preload=PRELOAD_AI
    )
    try:
        running = next(line for line in planner.lines if "soorma run: running" in line)
        assert "nimbus-support (" in running, running
        first, first_plan = await ask(env, "How long does a refund take to reach my card?", planner)
        assert "5 business days" in first.lines[0], first.output
        assert first.lines[1] == "sources: plans-and-billing.md"
        second, second_plan = await ask(env, "What does billing error NN-402 mean?", planner)
        assert "declined the card" in second.lines[0], second.output
        assert await planner.stop(signal.SIGINT) == 0, planner.output
    finally:
        await planner.kill()

    settings = PlatformSettings(memory_url=services["SOORMA_MEMORY_URL"], user_id="customer-7")
    async with PlatformContext.from_env(settings=settings) as context:
        plan = await context.memory.get_plan_context(first_plan)
        later = await context.memory.get_plan_context(second_plan)
        chunks = {c.id: c for c in await context.memory.knowledge.list(limit=200)}
        rules = {p.id for p in await context.memory.procedures.list(agent_id="nimbus-support")}
        episodes = await context.memory.episodes.recent("nimbus-support")
    assert plan is not None and plan.status == "completed"
    (record,) = plan.bookkeeping.choreography.audit
    prompt = record["prompt"][1]["content"]
    assert "Retrieved memory" in prompt and "Refunds reach the card within 5" in prompt
    retrieved = record["retrieved"]
    assert retrieved["knowledge"] and set(retrieved["knowledge"]) <= set(chunks)
    assert {chunks[i].parent_external_id for i in retrieved["knowledge"]} <= DOCS
    assert retrieved["procedures"] and set(retrieved["procedures"]) <= rules
    assert retrieved["episodes"] == []  # nothing was asked before
    for item_id in retrieved["knowledge"] + retrieved["procedures"]:
        assert f"[{item_id}]" in prompt

    # The second question is decided knowing the first one (episodic memory).
    assert [e.role for e in episodes] == ["user", "assistant", "user", "assistant"]
    assert later is not None
    (again,) = later.bookkeeping.choreography.audit
    assert set(again["retrieved"]["episodes"]) == {episodes[0].id, episodes[1].id}
    assert "How long does a refund take" in again["prompt"][1]["content"]


async def test_ingesting_again_replaces_the_documents_instead_of_duplicating_them(
    services: dict[str, str],
):
    env = offline_env(**services)
    for _ in range(2):
        ingest = await Proc.start(sys.executable, str(EXAMPLE / "ingest.py"), env=env)
        assert await ingest.wait(within=60) == 0, ingest.output
    settings = PlatformSettings(memory_url=services["SOORMA_MEMORY_URL"], user_id="customer-7")
    async with PlatformContext.from_env(settings=settings) as context:
        chunks = await context.memory.knowledge.list(limit=200)
    per_doc = {doc: [c for c in chunks if c.parent_external_id == doc] for doc in DOCS}
    assert all(per_doc.values())
    assert len(chunks) == sum(len(v) for v in per_doc.values())
    for doc, doc_chunks in per_doc.items():
        assert sorted(c.chunk_index for c in doc_chunks) == list(range(len(doc_chunks))), doc
