"""A ChoreographyPlanner killed (SIGKILL) before a trigger's ack repeats nothing.

Issue 9: killed right after its first PUBLISH and before the goal's ack, the redelivered
goal asked the model again and published the request again (the tool ran twice); killed
right after the step taken on an answer, the redelivered answer did the same for the
next tool. Here the planner is killed at both points (ack_window=0.9 and a handler held
after its step make the window certain); each model call and each request happens once,
and a request re-sent by the restarted planner keeps its event id.
"""

from __future__ import annotations

import pytest
from crash_support import llm_calls, register_tool, sigkill, start_agent, until
from sdk_helpers import Proc

from testsupport.capture import capture
from testsupport.forkserver import PRELOAD_AI
from testsupport.settle import MARKER, caught_up, settled

pytestmark = [pytest.mark.asyncio, pytest.mark.redis, pytest.mark.postgres]

READY = "agent advisor ready"
VISIBILITY = 2.0


# Three planner lives and a visibility timeout: more room than the suite's 120 s default.
@pytest.mark.timeout(300)
async def test_choreography_planner_killed_before_acks_repeats_no_model_call_or_request(
    services,
    context,
):
    bus = context.bus
    await register_tool(context, "searcher", "search.requested", "search.done")
    await register_tool(context, "summarizer", "summarize.requested", "summarize.done")

    async def life(**env: str) -> Proc:
        # Forked from a server that has imported litellm: a restart after a SIGKILL
        # costs no import (the kills stay real SIGKILLs of a separate process).
        return await start_agent("choreo_planner.py", services, READY, preload=PRELOAD_AI, **env)

    procs = []
    try:
        async with (
            capture(
                context, ["action-requests"], ["search.requested", "summarize.requested"]
            ) as requests,
            capture(context, ["action-results"], ["research.done", MARKER]) as results,
        ):

            def sent(event_type):
                return [e for e in requests if e.type == event_type]

            # 1. The goal's step publishes search.requested; killed before the goal's ack.
            procs.append(await life(CRASH_HOLD="after_goal"))
            await bus.request(
                "research.goal", {"topic": "owls"}, "research.done", correlation_id="ask-1"
            )
            await procs[0].wait_for("stepped goal ")
            await until(lambda: len(sent("search.requested")) == 1)
            await sigkill(procs[0])

            # 2. A restarted planner gets the answer (and, after the visibility timeout,
            #    the goal again); killed after the step taken on the answer.
            procs.append(await life(CRASH_HOLD="after_answer"))
            search = sent("search.requested")[0]
            await bus.respond(
                "search.done", {"found": "SEARCH-MARKER"}, correlation_id=search.correlation_id
            )
            await procs[1].wait_for("stepped search.done ")
            await until(lambda: len(sent("summarize.requested")) >= 1)
            # Let the redelivered goal reach this planner before it dies: at once when it
            # resumes the killed planner's consumer, else after the visibility timeout.
            await procs[1].wait_for("stepped goal ", within=VISIBILITY + 30)
            await sigkill(procs[1])

            # 3. A third life gets the answer again; the summary's answer completes.
            procs.append(await life())
            summarize = sent("summarize.requested")[0]
            await bus.respond(
                "summarize.done",
                {"summary": "SUMMARY-MARKER"},
                correlation_id=summarize.correlation_id,
            )
            await until(lambda: any(e.type == "research.done" for e in results))
            # Every delivery to the planners handled and acked: nothing more can come back,
            # and the capture holds all they published.
            await settled(context, within=60)
            await caught_up(context, results, "action-results")

        answers = [e for e in results if e.type == "research.done"]

        assert answers[0].correlation_id == "ask-1"
        assert answers[0].data["status"] == "completed"
        assert {e.id for e in answers} == {answers[0].id}
        # One decision per trigger: goal, search answer, summary answer.
        assert llm_calls(*procs) == 3, [p.output for p in procs]
        # Each request is one event, however often it was (re-)sent.
        assert len({e.id for e in sent("search.requested")}) == 1
        assert len({e.id for e in sent("summarize.requested")}) == 1
    finally:
        for proc in procs:
            await proc.kill()
