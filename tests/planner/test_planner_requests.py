"""What a declarative planner asks of the platform per plan (B3's hot path).

Requests are observed in the planner's own HTTP transport, against the real services.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter

import httpx
import pytest
from planner_support import responder, wait_for

from soorma import PlatformContext
from soorma.agents.planner import Planner
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition
from testsupport.capture import capture

pytestmark = pytest.mark.asyncio

STEPS = ("fetch", "summarize")


def two_step_machine() -> dict[str, StateConfig]:
    states = {"start": StateConfig(state_name="start", default_next=STEPS[0])}
    for i, step in enumerate(STEPS):
        states[step] = StateConfig(
            state_name=step,
            action=StateAction(
                event_type=f"{step}.requested",
                response_event=f"{step}.done",
                data={"topic": "{goal_data.topic}"},
            ),
            transitions=[
                StateTransition(
                    on_event=f"{step}.done",
                    to_state=STEPS[i + 1] if i + 1 < len(STEPS) else "done",
                )
            ],
        )
    states["done"] = StateConfig(state_name="done", is_terminal=True)
    return states


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts requests by method and route (ids collapsed), and the ids acked."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.calls: Counter[str] = Counter()
        self.acked: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.strip("/").split("/")
        route = "/".join(p if i < 3 else "{id}" for i, p in enumerate(parts))
        if not route.endswith("/stream"):
            self.calls[f"{request.method} /{route}"] += 1
        if route == "v1/events/ack":
            self.acked += json.loads(request.content)["ids"]
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_declarative_plan_reads_only_its_goal_and_answers_and_ends_in_one_write(platform):
    transport = CountingTransport()
    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx.AsyncClient(transport=transport))
        context = PlatformContext.from_env(settings=platform.settings, http=http)
        planner = Planner(
            name="lean",
            context=context,
            plan_definition=PlanDefinition(plan_type="digest.goal", states=two_step_machine()),
        )
        await platform.start(planner)
        for step in STEPS:
            await platform.start(
                responder(
                    platform,
                    f"{step}-worker",
                    f"{step}.requested",
                    lambda e, step=step: (f"{step}.done", {"step": step}),
                )
            )
        client = platform.context()
        async with capture(client, ["system-events"], ["plan.*"]) as lifecycle:
            answer = await client.bus.call(
                "digest.goal", {"topic": "x"}, response_event="digest.done", timeout=30
            )
            await wait_for(lambda: any(e.type == "plan.completed" for e in lifecycle))
        await planner.stop()  # flushes the acks

    assert answer.data["status"] == "completed"
    assert answer.data["result"] == {"fetch": {"step": "fetch"}, "summarize": {"step": "summarize"}}
    # Its stream carries the goal and the answers its machine waits for: not its own
    # step requests, not the final answer it sent.
    assert planner.transition_topics == ["action-results"]
    # Its goal, its steps' answers, and the cancel requests every planner takes.
    assert planner.event_type_filters == [
        "digest.goal",
        "fetch.done",
        "plan.cancel_requested",
        "summarize.done",
    ]
    assert len(transport.acked) == 1 + len(STEPS)  # deliveries the planner settled
    calls = transport.calls
    # One create (with the first step), one guarded write per answer; the last answer's
    # write also completes the plan. No reads: the plan cache has what was written.
    assert calls["POST /v1/memory/plan-context"] == 1
    assert calls["PUT /v1/memory/plan-context/{id}"] == len(STEPS)
    assert not [c for c in calls if c.startswith("GET /v1/memory")]
    # Every publish is a batch: lifecycle events travel with the action or answer.
    assert calls["POST /v1/events/publish"] == 0
    assert calls["POST /v1/events/publish-batch"] == len(STEPS) + 1
    assert 1 <= calls["POST /v1/events/ack"] <= 3  # three deliveries, batched

    mine = [
        (e.type, e.data.get("to_state"), e.data.get("status"))
        for e in lifecycle
        if e.plan_id == answer.data["plan_id"]
    ]
    assert mine == [
        ("plan.started", None, "running"),
        ("plan.state_changed", "fetch", "running"),
        ("plan.state_changed", "summarize", "running"),
        ("plan.state_changed", "done", "running"),
        ("plan.completed", None, "completed"),
    ]


async def test_a_handwritten_transition_handler_sees_requests_too_as_the_seed_says():
    planner = Planner(name="custom")

    @planner.on_transition()
    async def drive(transition, context):
        pass

    assert planner.transition_topics == ["action-results", "action-requests"]
    assert planner.event_type_filters is None


async def test_a_declarative_planner_can_widen_what_drives_its_machine():
    planner = Planner(
        name="wide",
        transition_topics=["action-results", "business-facts"],
        transition_event_types=["*"],
        plan_definition=PlanDefinition(plan_type="digest.goal", states=two_step_machine()),
    )
    assert planner.topics == [
        "action-requests",
        "action-results",
        "business-facts",
        "system-events",  # cancel requests
    ]
    assert planner.event_type_filters is None


async def test_transition_event_types_must_be_named():
    planner = Planner(name="p")
    with pytest.raises(ValueError, match="at least one event type"):
        planner.on_transition(event_types=[])
    with pytest.raises(ValueError, match="non-empty strings"):
        planner.on_transition(event_types=[""])
