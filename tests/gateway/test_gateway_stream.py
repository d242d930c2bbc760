"""LLM agents stream their partial text to an A2A streaming client (soorma.ai.stream_text).

The model is litellm's streamed mock (``mock_response`` with ``stream=True``); everything
else is real: the agent's chunks go over the event bus, the gateway turns them into
artifact updates, the official a2a-sdk client (and a raw SSE request) reads them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import httpx
import pytest
import pytest_asyncio
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from soorma import PlanContext, Planner, Worker
from soorma.ai import _llm, stream_text
from soorma.client import verified_tls
from soorma_common.state import StateConfig
from testsupport import forkserver
from testsupport.a2a import a2a_client, capability, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")

ANSWER = (
    "Dragons hoard gold because the old stories needed a reason for heroes to visit, "
    "and a cave full of treasure is a very good reason."
)
SCHEMA = {
    "type": "object",
    "properties": {"topic": {"type": "string"}},
    "required": ["topic"],
}
MODEL = "openai/gpt-4o-mini"


def make_agents(worker_context, planner_context) -> list[Worker | Planner]:
    """``explain``: a Worker streams the answer; ``tale``: a Planner's plan; ``quip``: a goal."""
    worker = Worker(
        name="explainer",
        description="Explains things with an LLM.",
        context=worker_context,
        capabilities=[capability("explain", "topic.explain", SCHEMA)],
    )

    @worker.on_task("topic.explain")
    async def explain(task, ctx):
        text = await stream_text(
            task,
            f"Explain {task.data['topic']}",
            model=MODEL,
            mock_response=ANSWER,
            artifact_id="answer",
            name="answer",
            status="writing the answer",
            min_chars=20,
        )
        await task.complete(message=f"{len(text)} characters")

    planner = Planner(
        name="teller",
        description="Tells tales with an LLM.",
        context=planner_context,
    )

    @planner.on_goal("tale.requested", description="Tells a tale")
    async def tale(goal, ctx):
        plan = await PlanContext.create(
            ctx,
            goal_event=goal.event_type,
            goal_data=goal.data,
            state_machine={"start": StateConfig(state_name="start", is_terminal=True)},
            response_event=goal.response_event,
            response_topic=goal.response_topic,
            correlation_id=goal.correlation_id,
            session_id=goal.session_id,
        )
        text = await stream_text(plan, "A tale", model=MODEL, mock_response=ANSWER, min_chars=20)
        await plan.finalize({"length": len(text)})

    @planner.on_goal("quip.requested", description="Answers at once, no plan")
    async def quip(goal, ctx):
        text = await stream_text(
            goal, "A quip", model=MODEL, context=ctx, mock_response=ANSWER, min_chars=20
        )
        await ctx.bus.respond(
            goal.response_event,
            {"success": True, "message": f"{len(text)} characters"},
            correlation_id=goal.correlation_id,
        )

    return [worker, planner]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agents(platform: Platform):
    # litellm takes seconds to import on a busy machine: before the client waits.
    await asyncio.to_thread(_llm.load_litellm)
    started = make_agents(await platform.context(), await platform.context())
    for agent in started:
        await agent.start()
    yield started
    for agent in started:
        await agent.stop()


def ask(skill: str, topic: str = "dragons"):
    return send_request(user_message(data={"topic": topic}, skill=skill))


@pytest.mark.parametrize("skill", ["explain", "tale.requested", "quip.requested"])
async def test_an_llm_agent_streams_its_text_in_chunks_to_an_a2a_client(
    platform: Platform, agents, skill: str
):
    async with a2a_client(platform.url, "JSONRPC", headers=HEADERS_A) as client:
        events = await collect(client, ask(skill))
        stored = await client.get_task(GetTaskRequest(id=final_task(events).id))
    artifact_id = "answer" if skill == "explain" else "output"
    chunks = [
        e.artifact_update
        for e in events
        if e.HasField("artifact_update") and e.artifact_update.artifact.artifact_id == artifact_id
    ]
    assert len(chunks) >= 3
    assert [c.append for c in chunks] == [False] + [True] * (len(chunks) - 1)
    assert [c.last_chunk for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert all(len(c.artifact.parts[0].text) >= 20 for c in chunks[:-1])
    assert "".join(c.artifact.parts[0].text for c in chunks) == ANSWER
    statuses = [e.status_update.status for e in events if e.HasField("status_update")]
    assert statuses[-1].state == TaskState.TASK_STATE_COMPLETED
    # The stored task holds the whole text: the chunks appended into one artifact.
    streamed = next(a for a in stored.artifacts if a.artifact_id == artifact_id)
    assert "".join(p.text for p in streamed.parts) == ANSWER
    if skill == "explain":
        assert statuses[0].state == TaskState.TASK_STATE_WORKING
        assert statuses[0].message.parts[0].text == "writing the answer"
        assert statuses[-1].message.parts[0].text == f"{len(ANSWER)} characters"


async def test_the_chunks_arrive_as_sse_artifact_updates_on_http_json(platform: Platform, agents):
    """The other binding, read without the SDK: POST /message:stream, an SSE stream of
    StreamResponse JSON objects."""
    body = {
        "message": {
            "messageId": "m-stream-raw",
            "role": "ROLE_USER",
            "parts": [{"data": {"topic": "owls"}}],
            "metadata": {"skill": "explain"},
        }
    }
    headers = {**HEADERS_A, "A2A-Version": "1.0", "Accept": "text/event-stream"}
    updates = []
    async with (
        httpx.AsyncClient(verify=verified_tls(), timeout=30) as http,
        http.stream("POST", f"{platform.url}/message:stream", json=body, headers=headers) as reply,
    ):
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        async for line in reply.aiter_lines():
            if line.startswith("data:"):
                updates.append(json.loads(line[5:]))
    chunks = [u["artifactUpdate"] for u in updates if "artifactUpdate" in u]
    assert len(chunks) >= 3
    assert chunks[-1].get("lastChunk") is True
    assert not chunks[0].get("append") and all(c.get("append") for c in chunks[1:])
    assert "".join(c["artifact"]["parts"][0]["text"] for c in chunks) == ANSWER
    assert updates[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


SINK_SCRIPT = """
import asyncio, json, warnings
from soorma.ai import _llm, stream_text

class Sink:
    def __init__(self):
        self.sent = []

    async def send_artifact(self, *parts, artifact_id="output", name=None, append=False,
                            last_chunk=False):
        self.sent.append([parts[0], append, last_chunk])
        return "id"

_llm.load_litellm()
# What pytest does between tests: litellm's own filters are gone, warnings are errors.
warnings.resetwarnings()
warnings.simplefilter("error")
sink = Sink()
text = asyncio.run(
    stream_text(sink, "hi", model="openai/gpt-4o-mini", mock_response=%r, min_chars=10)
)
print(json.dumps({"text": text, "sent": sink.sent}))
"""


@pytest.mark.asyncio(loop_scope="function")
async def test_streaming_works_after_the_warning_filters_were_reset():
    """The first streamed answer builds litellm's response types; pydantic's ReadOnly
    warning there must not become an error once litellm's import-time filter is gone
    (it failed in the full suite's order: litellm loaded by an earlier test)."""
    # Forked with litellm imported, as the script itself would have it imported before
    # the filters are reset; nothing has streamed in the server.
    done = await asyncio.to_thread(
        forkserver.run,
        [sys.executable, "-c", SINK_SCRIPT % ANSWER],
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        timeout=120,
        preload=forkserver.PRELOAD_AI,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["text"] == ANSWER
    sent = result["sent"]
    assert "".join(s[0] for s in sent) == ANSWER
    assert [s[1] for s in sent] == [False] + [True] * (len(sent) - 1)
    assert [s[2] for s in sent] == [False] * (len(sent) - 1) + [True]
    assert all(len(s[0]) >= 10 for s in sent[:-1])
