"""A handler's exception reaches the caller as ``HandlerFailed``: the handler's message
(naming the exception class when the text alone says nothing), its class name and the
request's id; ``bus.call``, ``soorma call`` and ``run_client`` show it in one line."""

from __future__ import annotations

import io
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sdk_helpers import Proc, run_cli, subprocess_env

from memory_service import create_app as create_memory_app
from soorma import Event, HandlerFailed, PlatformContext, PlatformSettings, Tool, Worker, run_client
from soorma_common.errors import describe_exception
from testsupport.server import LiveServer, closed_port, serve
from testsupport.services import memory_settings

SOORMA = str(Path(sys.executable).with_name("soorma"))


@pytest_asyncio.fixture
async def memory_service(sqlite_url: str, tmp_path: Any) -> AsyncIterator[LiveServer]:
    async with serve(create_memory_app(memory_settings(sqlite_url, tmp_path))) as server:
        yield server


@pytest_asyncio.fixture
async def platform(
    event_service: LiveServer, memory_service: LiveServer
) -> AsyncIterator[PlatformContext]:
    # Nothing else: the other services at a closed port, never a platform someone runs.
    nowhere = f"http://127.0.0.1:{closed_port()}"
    settings = PlatformSettings(
        event_service_url=event_service.url,
        memory_url=memory_service.url,
        registry_url=nowhere,
        tracker_url=nowhere,
        gateway_url=nowhere,
    )
    async with PlatformContext.from_env(settings=settings) as context:
        yield context


def lookup_tool(context: PlatformContext) -> Tool:
    # Answers are recorded in the memory service, as a tool keeps them by default.
    tool = Tool(name="lookup", context=context)

    @tool.on_invoke("lookup.requested")
    async def lookup(request, ctx):
        if request.data.get("empty"):
            raise ValueError("the name must not be empty")
        return {"topic": request.data["topic"]}

    return tool


@pytest.mark.asyncio
async def test_a_tools_key_error_is_raised_at_the_caller_as_handler_failed(
    platform: PlatformContext,
):
    tool = lookup_tool(platform)
    await tool.start()
    try:
        answer = await platform.bus.call(
            "lookup.requested", {"other": 1}, response_event="lookup.done", timeout=20
        )
        refused = await platform.bus.call(
            "lookup.requested", {"empty": True}, response_event="lookup.done", timeout=20
        )
        ok = await platform.bus.call(
            "lookup.requested", {"topic": "tea"}, response_event="lookup.done", timeout=20
        )
    finally:
        await tool.stop()

    assert answer.data["error"] == "KeyError: 'topic'"
    assert answer.data["error_type"] == "KeyError"
    with pytest.raises(HandlerFailed) as failed:
        answer.raise_for_error()
    assert "KeyError: 'topic'" in str(failed.value)
    assert failed.value.error_type == "KeyError"
    assert failed.value.message == "KeyError: 'topic'"
    assert failed.value.event_id == answer.data["request_id"]
    assert failed.value.answer_type == "lookup.done"
    assert "\n" not in str(failed.value)

    # A message that reads as a sentence stands alone; its type still travels.
    with pytest.raises(HandlerFailed) as sentence:
        refused.raise_for_error()
    assert sentence.value.message == "the name must not be empty"
    assert sentence.value.error_type == "ValueError"

    assert ok.raise_for_error() is ok
    assert ok.data["result"] == {"topic": "tea"}


@pytest.mark.asyncio
async def test_a_workers_task_failed_with_an_exception_is_raised_as_handler_failed(
    platform: PlatformContext,
):
    worker = Worker(name="indexer", context=platform)

    @worker.on_task("index.requested")
    async def index(task, ctx):
        try:
            await task.complete({"topic": task.data["topic"]})
        except KeyError as exc:
            await task.fail(exc)

    await worker.start()
    try:
        answer = await platform.bus.call(
            "index.requested", {"other": 1}, response_event="index.done", timeout=20
        )
    finally:
        await worker.stop()

    assert answer.data["status"] == "failed"
    with pytest.raises(HandlerFailed) as failed:
        answer.raise_for_error()
    assert "KeyError: 'topic'" in str(failed.value)
    assert failed.value.error_type == "KeyError"
    assert failed.value.event_id == answer.data["task_id"]


@pytest.mark.asyncio
async def test_soorma_call_prints_the_handlers_failure_in_one_line(
    event_service: LiveServer, tmp_path: Path
):
    agent = tmp_path / "lookup.py"
    agent.write_text(
        "from soorma import Tool\n"
        "tool = Tool(name='lookup', answer_retention=0)\n"
        "@tool.on_invoke('lookup.requested')\n"
        "async def lookup(request, context):\n"
        "    return {'topic': request.data['topic']}\n"
    )
    env = subprocess_env(
        SOORMA_EVENT_SERVICE_URL=event_service.url, SOORMA_REGISTRY_URL="http://127.0.0.1:9"
    )
    tool = await Proc.start(SOORMA, "run", "--no-reload", str(agent), env=env)
    try:
        await tool.wait_for("soorma run: running", within=60)
        # The one-shot `soorma call` in this process (tests/sdk/test_cli_call.py runs it
        # as one); the tool under a real `soorma run`.
        call = await run_cli("call", "lookup.requested", "--data", "{}", env=env)
        code = call.proc.returncode
        assert await tool.stop(signal.SIGINT) == 0, tool.output
    finally:
        await tool.kill()
    assert code == 1, call.output
    # The answer as JSON, then the failure in one line: no traceback.
    assert len(call.lines) == 2, call.output
    assert '"error_type": "KeyError"' in call.lines[0]
    assert call.lines[1].startswith("soorma: the handler failed: KeyError: 'topic' (request ")


def failed_answer(**data: Any) -> Event:
    return Event.from_delivery(
        {
            "id": "answer-1",
            "source": "test",
            "type": "lookup.done",
            "topic": "action-results",
            "data": {"request_id": "request-1", "success": False, **data},
        }
    )


def test_run_client_prints_a_handler_failure_in_one_line():
    async def main() -> int:
        failed_answer(
            error="ValidationError: 2 errors\n  name: missing\n  age: missing",
            error_type="ValidationError",
        ).raise_for_error()
        return 0

    err = io.StringIO()
    assert run_client(main(), err=err) == 1
    assert err.getvalue() == (
        "error: the handler failed: ValidationError: 2 errors name: missing age: missing "
        "(request request-1)\n"
    )


def test_an_answer_naming_no_request_is_named_by_its_own_id():
    answer = Event.from_delivery(
        {
            "id": "answer-2",
            "source": "test",
            "type": "research.done",
            "topic": "action-results",
            "data": {"plan_id": "p-1", "status": "failed", "error": "plan reached state 'failed'"},
        }
    )
    with pytest.raises(HandlerFailed) as failed:
        answer.raise_for_error()
    assert str(failed.value) == "the handler failed: plan reached state 'failed' (answer answer-2)"
    assert failed.value.event_id == failed.value.answer_id == "answer-2"


def test_a_rejected_task_raises_with_its_reason_and_no_type():
    with pytest.raises(HandlerFailed) as rejected:
        failed_answer(status="rejected", reason="out of scope").raise_for_error()
    assert rejected.value.message == "out of scope"
    assert rejected.value.error_type is None


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        (KeyError("topic"), "KeyError: 'topic'"),
        (KeyError("a long key"), "KeyError: 'a long key'"),
        (IndexError("list index out of range"), "list index out of range"),
        (ZeroDivisionError(), "ZeroDivisionError"),
        (AttributeError("foo"), "AttributeError: foo"),
        (ValueError("amount must be positive"), "amount must be positive"),
    ],
)
def test_an_exception_is_described_by_its_class_when_its_text_says_nothing(
    exc: BaseException, text: str
):
    assert describe_exception(exc) == text
