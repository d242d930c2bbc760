"""One trigger, one model call: a step's model answer is not paid twice (issue 9, chaos).

In the chaos run ChoreographyPlanner plans made more model calls than without faults:

* the memory service went down after the model answered and before the step was
  recorded; the agent ran the handler again and the step asked the model again;
* a planner process died during (or right after) its model call; the redelivered
  trigger must ask again, and now sends the same idempotency key, so a provider or
  gateway that honours it bills the call once.

Real event, memory and registry services (the memory service behind a TCP relay the
test can cut); the model is a scripted OpenAI-compatible server on loopback, called
through litellm's ``openai/...`` provider, which records every request it gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from choreo_helpers import Stack, complete
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from soorma import AgentOptions, PlatformContext, PlatformSettings
from soorma.agents import _dispatch
from soorma.ai.choreography import ChoreographyPlanner
from testsupport import tenant_services
from testsupport.relay import TcpRelay
from testsupport.server import LiveServer, serve
from testsupport.tenant_services import running

# One set of services for the module; each test is a tenant of its own on them.
pytestmark = pytest.mark.asyncio(loop_scope="module")
stack, context = tenant_services.stack, tenant_services.context


MODEL = "openai/scripted-model-once"


class ModelServer:
    """An OpenAI-compatible chat endpoint answering every call with ``decision``.

    ``requests`` holds (headers, body) of each call; ``before_answer(n)`` runs before
    the n-th answer is sent (1-based).
    """

    def __init__(
        self,
        decision: dict[str, Any],
        before_answer: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self.decision = decision
        self.before_answer = before_answer
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])

    async def _chat(self, request: Request) -> JSONResponse:
        self.requests.append((dict(request.headers), await request.json()))
        if self.before_answer is not None:
            await self.before_answer(len(self.requests))
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "scripted",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": json.dumps(self.decision)},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    def keys(self, header: str = "idempotency-key") -> list[str | None]:
        return [headers.get(header.lower()) for headers, _ in self.requests]


class LogSeen(logging.Handler):
    """Sets ``seen`` when the agent logs a message containing ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text = text
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


@pytest_asyncio.fixture(loop_scope="module")
async def relay(stack: Stack) -> AsyncIterator[TcpRelay]:
    relay = TcpRelay(int(stack.memory_url.rsplit(":", 1)[1]))
    await relay.start()
    yield relay
    if relay.running:
        await relay.stop()


def relayed_settings(stack: Stack, relay: TcpRelay) -> PlatformSettings:
    return PlatformSettings(
        event_service_url=stack.event_url,
        memory_url=relay.url,
        registry_url=stack.registry_url,
        tenant_id=stack.tenant,
    )


def make_planner(
    settings: PlatformSettings, model: LiveServer, **options: Any
) -> ChoreographyPlanner:
    planner = ChoreographyPlanner(
        name="model-once",
        reasoning_model=MODEL,
        api_base=f"{model.url}/v1",
        api_key="sk-test-model-once",
        repair_retries=0,
        context=PlatformContext.from_env(settings=settings),
        **options,
    )

    @planner.on_goal("model.once.goal")
    async def on_goal(goal: Any, context: Any) -> None:
        plan = await planner.open_plan(goal, context)
        await planner.step(plan, context, trigger=f"new goal: {goal.data}")

    return planner


@pytest.mark.parametrize("retry", ["agent runs the handler again", "nack and redelivery"])
async def test_memory_outage_after_the_model_answered_asks_the_model_once(
    stack: Stack,
    context: PlatformContext,
    relay: TcpRelay,
    retry: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The agent runs a handler failing with ServiceUnavailable again for up to 60 s, then
    # nacks it and the event service redelivers it: the second path, without the wait.
    if retry == "nack and redelivery":
        monkeypatch.setattr(_dispatch, "UNAVAILABLE_RETRY_SECONDS", 0.0)
        retried = LogSeen("failed on model.once.goal")
    else:
        retried = LogSeen("running it again")

    async def memory_goes_down(n: int) -> None:
        if n == 1:  # the model answers; the step can no longer be recorded
            await relay.stop()

    model = ModelServer(complete({"summary": "once"}), before_answer=memory_goes_down)
    agent_log = logging.getLogger("soorma.agent")
    agent_log.addHandler(retried)
    async with serve(model.app) as model_server:
        planner = make_planner(
            relayed_settings(stack, relay), model_server, options=AgentOptions(max_deliveries=50)
        )
        # The memory client's own reconnects (0.2 + 0.4 + 0.8 s) only delay the outage
        # this test is about; they still happen, without the wait.
        planner.context.memory.retry_backoff = 0.001  # type: ignore[union-attr]
        async with running(planner):
            asked = asyncio.create_task(
                context.bus.call(
                    "model.once.goal",
                    {"topic": "owls"},
                    response_event="model.once.done",
                    timeout=60,
                )
            )
            # The handler failed on the unreachable memory service (and is run again, or
            # was nacked and comes back).
            try:
                await asyncio.wait_for(retried.seen.wait(), 30)
            finally:
                agent_log.removeHandler(retried)
            assert not asked.done()
            await relay.start()
            answer = await asked

    assert answer.data["status"] == "completed"
    assert answer.data["result"] == {"summary": "once"}
    assert len(model.requests) == 1, "the retried trigger asked the model again"
    # The decision's audit record was kept once the memory service was back.
    plan = await context.memory.get_plan_context(answer.data["plan_id"])  # type: ignore[union-attr]
    audit = plan.bookkeeping.choreography.audit  # type: ignore[union-attr]
    assert [record["attempt"] for record in audit] == ["first"]


async def test_the_same_model_call_for_a_trigger_carries_the_same_idempotency_key(
    stack: Stack, context: PlatformContext
) -> None:
    held = asyncio.Event()
    release = asyncio.Event()

    async def first_call_hangs(n: int) -> None:
        if n == 1:  # the process "dies" during this call
            held.set()
            await release.wait()

    model = ModelServer(complete({"summary": "keyed"}), before_answer=first_call_hangs)
    settings = stack.settings()
    goal = {"id": "goal-model-once-1", "event_type": "model.once.goal", "data": {"topic": "owls"}}
    async with serve(model.app) as model_server:
        try:
            # 1. A planner process asks the model for trigger t-1 and is killed mid-call.
            first = make_planner(settings, model_server)
            async with first.context:
                plan = await first.open_plan(goal, first.context)
                step = asyncio.create_task(
                    first.step(plan, first.context, trigger="new goal", trigger_id="t-1")
                )
                await asyncio.wait_for(held.wait(), 30)
                step.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await step
            # 2. Another process gets the trigger again: same call, same key, same prompt.
            second = make_planner(settings, model_server)
            async with second.context:
                plan = await second.open_plan(goal, second.context)
                await second.step(plan, second.context, trigger="new goal", trigger_id="t-1")
        finally:
            release.set()
        assert len(model.requests) == 2
        first_key, again_key = model.keys()
        assert first_key and first_key == again_key
        assert model.requests[0][1]["messages"] == model.requests[1][1]["messages"]

        # 3. Another trigger of another plan: another key.
        other_goal = {**goal, "id": "goal-model-once-2"}
        third = make_planner(settings, model_server)
        async with third.context:
            plan = await third.open_plan(other_goal, third.context)
            await third.step(plan, third.context, trigger="new goal", trigger_id="t-2")
        assert model.keys()[2] not in (None, first_key)

        # 4. Renamed, and turned off.
        renamed = make_planner(settings, model_server, idempotency_header="X-Request-Key")
        async with renamed.context:
            plan = await renamed.open_plan({**goal, "id": "g-3"}, renamed.context)
            await renamed.step(plan, renamed.context, trigger="new goal", trigger_id="t-3")
        off = make_planner(settings, model_server, idempotency_header=None)
        async with off.context:
            plan = await off.open_plan({**goal, "id": "g-4"}, off.context)
            await off.step(plan, off.context, trigger="new goal", trigger_id="t-4")
    renamed_headers, off_headers = model.requests[3][0], model.requests[4][0]
    assert renamed_headers.get("x-request-key") and "idempotency-key" not in renamed_headers
    assert "idempotency-key" not in off_headers and "x-request-key" not in off_headers


async def test_an_idempotency_header_must_be_a_header_name() -> None:
    with pytest.raises(ValueError, match="idempotency_header must be an HTTP header name"):
        ChoreographyPlanner(name="bad-header", idempotency_header="Idempotency Key: x")
