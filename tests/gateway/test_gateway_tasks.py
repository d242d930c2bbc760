"""Task lifecycle over both bindings with the official a2a-sdk client.

Stream (progress -> working -> completed), non-blocking send then get, list with filters
and pagination, cancel, input-required round trip, failure, rejection, artifacts of every
part type, resubscribe after a dropped stream, invalid input refused before the bus.
"""

from __future__ import annotations

import asyncio

import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from soorma import Tool
from soorma_common.events import ACTION_REQUESTS
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

S = TaskState


def texts(task) -> list[str]:
    return [p.text for p in task.status.message.parts if p.HasField("text")]


async def wait_state(client, task_id: str, state: int, within: float = 10.0):
    async with asyncio.timeout(within):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state == state:
                return task
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_stream_shows_progress_then_completes(platform: Platform, binding: str):
    async with a2a_client(platform.url, binding, headers=HEADERS_A) as client:
        events = await collect(
            client, send_request(user_message(data={"doc": "d1", "mode": "ok"}, skill="review"))
        )
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert events[0].HasField("task")
    assert S.TASK_STATE_WORKING in states
    progress = [
        e.status_update
        for e in events
        if e.HasField("status_update")
        and e.status_update.status.message.parts
        and e.status_update.status.message.parts[0].text == "reading the document"
    ]
    assert progress, events
    assert MessageToDict(progress[0].metadata) == {"progress": 0.5}
    assert states[-1] == S.TASK_STATE_COMPLETED
    artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert MessageToDict(artifacts[0].parts[0].data) == {"doc": "d1", "verdict": "approved"}


@pytest.mark.parametrize("binding", BINDINGS)
async def test_non_blocking_send_then_get_and_list(platform: Platform, binding: str):
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as client:
        first = final_task(
            await collect(
                client,
                send_request(
                    user_message(data={"text": "a"}, skill="echo", context_id=f"c1-{binding}"),
                    blocking=False,
                ),
            )
        )
        assert first.status.state in (
            S.TASK_STATE_SUBMITTED,
            S.TASK_STATE_WORKING,
            S.TASK_STATE_COMPLETED,
        )
        done = await wait_state(client, first.id, S.TASK_STATE_COMPLETED)
        assert done.context_id == f"c1-{binding}"
        assert done.history[0].message_id == "m-1"
        for i in range(3):
            await collect(
                client,
                send_request(
                    user_message(
                        data={"text": f"b{i}"},
                        skill="echo",
                        context_id=f"c2-{binding}",
                        message_id=f"m-b{i}",
                    )
                ),
            )
        page = await client.list_tasks(ListTasksRequest(context_id=f"c2-{binding}", page_size=2))
        assert len(page.tasks) == 2 and page.next_page_token
        rest = await client.list_tasks(
            ListTasksRequest(
                context_id=f"c2-{binding}", page_size=2, page_token=page.next_page_token
            )
        )
        assert len(rest.tasks) == 1 and not rest.next_page_token
        ids = {t.id for t in [*page.tasks, *rest.tasks]}
        assert first.id not in ids and len(ids) == 3
        completed = await client.list_tasks(
            ListTasksRequest(
                context_id=f"c2-{binding}", status=S.TASK_STATE_COMPLETED, include_artifacts=True
            )
        )
        assert len(completed.tasks) == 3
        assert all(t.artifacts for t in completed.tasks)
        bare = await client.list_tasks(ListTasksRequest(context_id=f"c2-{binding}"))
        assert not any(t.artifacts for t in bare.tasks)
        failed = await client.list_tasks(
            ListTasksRequest(context_id=f"c2-{binding}", status=S.TASK_STATE_FAILED)
        )
        assert not failed.tasks


@pytest.mark.parametrize("binding", BINDINGS)
async def test_input_required_round_trip(platform: Platform, binding: str):
    async with a2a_client(platform.url, binding, headers=HEADERS_A) as client:
        events = await collect(
            client, send_request(user_message(data={"doc": "d2", "mode": "hitl"}, skill="review"))
        )
        asked = final_task(events) if events[-1].HasField("task") else None
        last = events[-1].status_update
        assert last.status.state == S.TASK_STATE_INPUT_REQUIRED
        task_id = last.task_id
        assert [p.text for p in last.status.message.parts] == ["Approve the document?"]
        del asked
        answer = user_message(
            text="looks good", data={"approved": True}, task_id=task_id, message_id="m-answer"
        )
        events = await collect(client, send_request(answer))
        final = await wait_state(client, task_id, S.TASK_STATE_COMPLETED)
    assert MessageToDict(final.artifacts[0].parts[0].data) == {
        "doc": "d2",
        "verdict": "approved",
        "note": "looks good",
    }
    answer_seen = platform.control.seen[-1]
    assert answer_seen["a2a_message"]["message_id"] == "m-answer"
    assert [m.message_id for m in final.history][:1] == ["m-1"]
    assert "m-answer" in [m.message_id for m in final.history]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_failure_rejection_and_artifacts(platform: Platform, binding: str):
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as client:
        failed = final_task(
            await collect(
                client,
                send_request(user_message(data={"doc": "x", "mode": "fail"}, skill="review")),
            )
        )
        rejected = final_task(
            await collect(
                client,
                send_request(user_message(data={"doc": "x", "mode": "reject"}, skill="review")),
            )
        )
        files = final_task(
            await collect(
                client,
                send_request(user_message(data={"doc": "x", "mode": "files"}, skill="review")),
            )
        )
    assert failed.status.state == S.TASK_STATE_FAILED
    assert texts(failed) == ["the document is unreadable"]
    assert rejected.status.state == S.TASK_STATE_REJECTED
    assert texts(rejected) == ["not my kind of document"]
    assert files.status.state == S.TASK_STATE_COMPLETED
    by_name = {a.name: a for a in files.artifacts}
    assert by_name["summary"].parts[0].text == "fine"
    assert MessageToDict(by_name["scores"].parts[0].data) == {"score": 9}
    url, raw = by_name["files"].parts
    assert (url.url, url.media_type, url.filename) == (
        "https://example.com/report.pdf",
        "application/pdf",
        "report.pdf",
    )
    assert (raw.raw, raw.filename) == (b"hello", "hello.txt")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_cancel_publishes_and_ends_canceled(platform: Platform, binding: str):
    context = await platform.context()
    async with context.bus.subscribe(["system-events"], event_types=["a2a.task.cancel"]) as sub:
        await sub.wait_ready()
        async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as c:
            task = final_task(
                await collect(
                    c,
                    send_request(
                        user_message(data={"doc": f"c-{binding}", "mode": "slow"}, skill="review"),
                        blocking=False,
                    ),
                )
            )
            await wait_state(c, task.id, S.TASK_STATE_WORKING)
            canceled = await c.cancel_task(CancelTaskRequest(id=task.id))
            assert canceled.status.state == S.TASK_STATE_CANCELED
            async with asyncio.timeout(5):
                event = await anext(aiter(sub))
            assert event.correlation_id == task.id
            assert event.data["task_id"] == task.id
            with pytest.raises(TaskNotCancelableError):
                await c.cancel_task(CancelTaskRequest(id=task.id))
            with pytest.raises(TaskNotFoundError):
                await c.cancel_task(CancelTaskRequest(id="no-such-task"))
            platform.control.release(f"c-{binding}")
            await asyncio.sleep(0.3)
            still = await c.get_task(GetTaskRequest(id=task.id))
    assert still.status.state == S.TASK_STATE_CANCELED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_resubscribe_after_a_dropped_stream(platform: Platform, binding: str):
    async with a2a_client(platform.url, binding, headers=HEADERS_A) as client:
        stream = client.send_message(
            send_request(user_message(data={"doc": f"r-{binding}", "mode": "slow"}, skill="review"))
        )
        first = await anext(stream)
        task_id = first.task.id
        await stream.aclose()  # the client drops its stream
        await wait_state(client, task_id, S.TASK_STATE_WORKING)
        resumed = client.subscribe(SubscribeToTaskRequest(id=task_id))
        snapshot = await anext(resumed)
        assert snapshot.task.id == task_id
        platform.control.release(f"r-{binding}")
        rest = [e async for e in resumed]
    states = [e.status_update.status.state for e in rest if e.HasField("status_update")]
    assert states[-1] == S.TASK_STATE_COMPLETED
    assert any(e.HasField("artifact_update") for e in rest)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_invalid_input_names_the_field_and_publishes_nothing(
    platform: Platform, binding: str
):
    context = await platform.context()
    async with context.bus.subscribe([ACTION_REQUESTS]) as sub:
        await sub.wait_ready()
        async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as c:
            with pytest.raises(InvalidParamsError) as wrong_type:
                await collect(
                    c,
                    send_request(
                        user_message(
                            data={"text": "x", "times": "two"},
                            skill="echo",
                            context_id="invalid-input",
                        )
                    ),
                )
            with pytest.raises(InvalidParamsError) as missing:
                await collect(c, send_request(user_message(data={"doc": "x"}, skill="review")))
            with pytest.raises(InvalidParamsError) as unknown:
                await collect(c, send_request(user_message(data={"text": "x"}, skill="nope")))
            listed = await c.list_tasks(ListTasksRequest(context_id="invalid-input"))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await anext(aiter(sub))
    assert "'times'" in wrong_type.value.message
    assert "'mode'" in missing.value.message
    assert "unknown skill 'nope'" in unknown.value.message
    assert not listed.tasks


async def test_plain_text_goes_to_a_skill_that_takes_text(platform: Platform):
    async with a2a_client(platform.url, "JSONRPC", streaming=False, headers=HEADERS_A) as c:
        task = final_task(await collect(c, send_request(user_message(text="hey", skill="echo"))))
        with pytest.raises(InvalidParamsError) as structured:
            await collect(c, send_request(user_message(text="hey", skill="review")))
    assert MessageToDict(task.artifacts[0].parts[0].data)["echo"] == "hey"
    assert "structured input" in structured.value.message


@pytest.mark.parametrize("binding", BINDINGS)
async def test_send_blocking_completes_with_the_tools_answer(platform: Platform, binding: str):
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as client:
        events = await collect(
            client,
            send_request(
                user_message(data={"text": "hi", "times": 2}, skill="echo", message_id="msg-7")
            ),
        )
    task = final_task(events)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    data = MessageToDict(task.artifacts[0].parts[0].data)
    assert data["echo"] == "hihi"
    assert data["message_id"] == "msg-7"


class MessageTool(Tool):
    """A tool registered with ``metadata.a2a_reply = "message"``: answers as a message."""

    def agent_definition(self):  # type: ignore[no-untyped-def]
        definition, standalone = super().agent_definition()
        definition.metadata["a2a_reply"] = "message"
        return definition, standalone


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_an_agent_may_answer_with_a_direct_message(
    platform: Platform, binding: str, streaming: bool
):
    name = f"greet-{binding.replace('+', '')}-{streaming}"
    tool = MessageTool(
        name=name,
        context=await platform.context(),
        capabilities=[capability(name, "greet.requested", {"type": "object"})],
    )

    @tool.on_invoke("greet.requested")
    async def greet(request, ctx):
        return {"artifacts": [{"parts": [{"text": f"Hello, {request.data['text']}!"}]}]}

    await tool.start()
    try:
        async with a2a_client(
            platform.url, binding, streaming=streaming, headers=HEADERS_A
        ) as client:
            events = await collect(client, send_request(user_message(text="Ada", skill=name)))
    finally:
        await tool.stop()
    assert len(events) == 1 and events[0].HasField("message")
    assert [p.text for p in events[0].message.parts] == ["Hello, Ada!"]


async def test_a_skill_declares_message_replies_in_its_schema(platform: Platform):
    """A plain SDK Tool, no subclass: ``"x-a2a-reply": "message"`` in one skill's payload
    schema makes that skill answer with a direct message; its other skill keeps tasks."""
    tool = Tool(
        name="greeter",
        context=await platform.context(),
        capabilities=[
            capability(
                "greet-message",
                "greet.message.requested",
                {"type": "object", "x-a2a-reply": "message"},
            ),
            capability("greet-task", "greet.task.requested", {"type": "object"}),
        ],
    )

    @tool.on_invoke("greet.message.requested")
    @tool.on_invoke("greet.task.requested")
    async def greet(request, ctx):
        return f"Hello, {request.data['text']}!"

    await tool.start()
    try:
        async with a2a_client(platform.url, streaming=False, headers=HEADERS_A) as client:
            as_message = await collect(
                client, send_request(user_message(text="Ada", skill="greet-message"))
            )
            as_task = await collect(
                client, send_request(user_message(text="Bob", skill="greet-task"))
            )
    finally:
        await tool.stop()
    assert len(as_message) == 1 and as_message[0].HasField("message")
    assert [p.text for p in as_message[0].message.parts] == ["Hello, Ada!"]
    task = final_task(as_task)
    assert task.status.state == S.TASK_STATE_COMPLETED
    assert [p.text for a in task.artifacts for p in a.parts] == ["Hello, Bob!"]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_input_required_task_checks_context_and_fails_on_timeout(
    platform: Platform, binding: str
):
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as client:
        task = final_task(
            await collect(
                client,
                send_request(
                    user_message(data={"doc": f"t-{binding}", "mode": "hitl"}, skill="review")
                ),
            )
        )
        assert task.status.state == S.TASK_STATE_INPUT_REQUIRED
        with pytest.raises(InvalidParamsError):
            await collect(
                client,
                send_request(
                    user_message(text="yes", task_id=task.id, context_id="another-context")
                ),
            )
        # The tracker's verdict when nobody answers in time (``task.timeout``).
        bus = (await platform.context()).bus
        await bus.publish(
            "system-events",
            "task.timeout",
            {"task_id": task.id, "sub_task_id": "s", "reason": "hitl_timeout"},
            correlation_id="s",
        )
        failed = await wait_state(client, task.id, S.TASK_STATE_FAILED)
    assert texts(failed) == ["no input before the deadline (hitl_timeout)"]
