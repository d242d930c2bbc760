"""What SDK agents can answer an A2A task with, beyond a result: artifacts while the task
runs, partial text in chunks (streamed to the client), a closing status message, and a
rejection with its reason; both bindings, streaming and not."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from google.protobuf.json_format import MessageToDict

from soorma import Worker
from testsupport.a2a import (
    BINDINGS,
    a2a_client,
    capability,
    collect,
    final_task,
    send_request,
    user_message,
)
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")

WRITE_SCHEMA = {
    "type": "object",
    "properties": {"topic": {"type": "string"}, "mode": {"enum": ["story", "reject"]}},
    "required": ["topic", "mode"],
}
CHUNKS = ["Once ", "upon ", "a time"]
CHAT_SCHEMA = {
    "type": "object",
    "x-a2a-reply": "either",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}


def make_writer(context) -> Worker:
    """``write`` (a story in chunks, or a rejection) and ``chat`` (the agent chooses)."""
    worker = Worker(
        name="writer",
        description="Writes stories.",
        context=context,
        capabilities=[
            capability("write", "story.write", WRITE_SCHEMA),
            capability("chat", "chat.said", CHAT_SCHEMA),
        ],
    )

    @worker.on_task("chat.said")
    async def chat(task, ctx):
        text = task.data["text"]
        if text.startswith("hi"):
            await task.complete("hello!", as_message=True)  # a quick reply: no task
        else:
            await task.report_progress(0.5, "thinking")
            await task.complete(f"long answer to {text}")

    @worker.on_task("story.write")
    async def write(task, ctx):
        if task.data["mode"] == "reject":
            await task.reject(f"I do not write about {task.data['topic']}")
            return
        await task.send_artifact({"data": {"words": 4}}, artifact_id="stats", name="stats")
        for index, chunk in enumerate(CHUNKS):
            await task.send_artifact(
                chunk,
                artifact_id="story",
                name="story",
                append=index > 0,
                last_chunk=index == len(CHUNKS) - 1,
            )
        await task.complete({"topic": task.data["topic"]}, message="the story is written")

    return worker


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def writer(platform: Platform) -> Worker:
    worker = make_writer(await platform.context())
    await worker.start()
    yield worker
    await worker.stop()


def request(mode: str, topic: str = "dragons"):
    return send_request(user_message(data={"topic": topic, "mode": mode}, skill="write"))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_streamed_chunks_artifacts_during_the_run_and_a_closing_message(
    platform: Platform, writer: Worker, binding: str
):
    async with a2a_client(platform.url, binding, headers=HEADERS_A) as client:
        events = await collect(client, request("story"))
        task_id = final_task(events).id
        stored = await client.get_task(GetTaskRequest(id=task_id))
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    story = [c for c in chunks if c.artifact.artifact_id == "story"]
    assert [c.artifact.parts[0].text for c in story] == CHUNKS
    assert [c.append for c in story] == [False, True, True]
    assert [c.last_chunk for c in story] == [False, False, True]
    assert any(c.artifact.artifact_id == "stats" for c in chunks)
    final = [e.status_update for e in events if e.HasField("status_update")][-1]
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert final.status.message.parts[0].text == "the story is written"
    by_id = {a.artifact_id: a for a in stored.artifacts}
    assert "".join(p.text for p in by_id["story"].parts) == "Once upon a time"
    assert MessageToDict(by_id["stats"].parts[0].data) == {"words": 4}
    assert stored.status.message.parts[0].text == "the story is written"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_rejection_ends_the_task_rejected_with_its_reason(
    platform: Platform, writer: Worker, binding: str
):
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as client:
        task = final_task(await collect(client, request("reject", topic="taxes")))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert task.status.message.parts[0].text == "I do not write about taxes"


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_the_agent_chooses_per_request_between_a_message_and_a_task(
    platform: Platform, writer: Worker, binding: str, streaming: bool
):
    def chat(text: str, *, blocking: bool = True):
        return send_request(user_message(text=text, skill="chat"), blocking=blocking)

    async with a2a_client(platform.url, binding, streaming=streaming, headers=HEADERS_A) as c:
        quick = await collect(c, chat("hi there"))
        slow = await collect(c, chat("what is the meaning of life"))
        no_wait = final_task(await collect(c, chat("hi again", blocking=False)))
        settled = await c.get_task(GetTaskRequest(id=no_wait.id))
        for _ in range(50):
            if settled.status.state == TaskState.TASK_STATE_COMPLETED:
                break
            await asyncio.sleep(0.1)
            settled = await c.get_task(GetTaskRequest(id=no_wait.id))
    assert len(quick) == 1 and quick[0].HasField("message")
    assert quick[0].message.parts[0].text == "hello!"
    assert slow[0].HasField("task")
    answer = final_text(slow)
    assert answer == "long answer to what is the meaning of life"
    # A client that does not wait gets a task, whatever the agent chooses.
    assert settled.status.state == TaskState.TASK_STATE_COMPLETED
    assert settled.artifacts[0].parts[0].text == "hello!"


def final_text(events) -> str:
    for event in reversed(events):
        if event.HasField("artifact_update"):
            return str(event.artifact_update.artifact.parts[0].text)
        if event.HasField("task") and event.task.artifacts:
            return str(event.task.artifacts[0].parts[0].text)
    raise AssertionError(events)


@pytest.mark.redis
@pytest.mark.asyncio(loop_scope="function")  # redis_platform is per test
async def test_chunks_arrive_before_the_answer_on_redis_streams(redis_platform: Platform):
    """On Redis Streams too: the chunks go on the answer's topic, so none is overtaken."""
    worker = make_writer(await redis_platform.context())
    await worker.start()
    try:
        for binding in BINDINGS:
            async with a2a_client(redis_platform.url, binding, headers=HEADERS_A) as client:
                for _ in range(3):
                    events = await collect(client, request("story"))
                    story = [
                        e.artifact_update.artifact.parts[0].text
                        for e in events
                        if e.HasField("artifact_update")
                        and e.artifact_update.artifact.artifact_id == "story"
                    ]
                    assert story == CHUNKS
    finally:
        await worker.stop()
