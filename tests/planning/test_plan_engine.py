"""The plan engine's pure step, with plain data: no services, no bus, no awaits."""

from __future__ import annotations

from typing import Any

from soorma.planning import engine
from soorma.planning.records import PlanState
from soorma.planning.steps import derived_id
from soorma.planning.transitions import recorded_ending
from soorma_common.events import (
    PLAN_COMPLETED,
    PLAN_FAILED,
    PLAN_STARTED,
    PLAN_STATE_CHANGED,
    PLAN_WAIT_TIMEOUT,
    PLAN_WAITING_FOR_INPUT,
    EventEnvelope,
)
from soorma_common.memory import PlanStatus
from soorma_common.state import StateAction, StateConfig, StateTransition, StateWait

MACHINE = {
    "start": StateConfig(state_name="start", default_next="searching"),
    "searching": StateConfig(
        state_name="searching",
        action=StateAction(
            event_type="web.search.requested",
            response_event="web.search.completed",
            data={"query": "{goal_data.topic}"},
        ),
        transitions=[
            StateTransition(
                on_event="web.search.completed", to_state="review", condition="data.pages > 5"
            ),
            StateTransition(on_event="web.search.completed", to_state="done"),
            StateTransition(on_event="web.search.failed", to_state="failed"),
        ],
    ),
    "review": StateConfig(
        state_name="review",
        wait=StateWait(
            event="review.approved",
            on_event="done",
            timeout_seconds=60,
            on_timeout="failed",
            reason="a person checks the pages",
        ),
    ),
    "done": StateConfig(state_name="done", is_terminal=True),
    "failed": StateConfig(state_name="failed", is_terminal=True),
}


def new_plan(**fields: Any) -> PlanState:
    values: dict[str, Any] = {
        "plan_id": "plan-1",
        "goal_event": "research.goal",
        "goal_data": {"topic": "owls"},
        "state_machine": MACHINE,
        "response_event": "research.done",
        "correlation_ids": ["plan-1"],
    }
    return PlanState(**(values | fields))


def event(event_type: str, data: dict[str, Any], *, corr: str, event_id: str) -> EventEnvelope:
    return EventEnvelope(
        id=event_id, type=event_type, topic="action-results", data=data, correlation_id=corr
    )


def searching() -> tuple[PlanState, str]:
    """A plan waiting for its search answer, and that request's correlation id."""
    first = engine.step(new_plan(), None, key="goal-1/default_next")
    assert first.request is not None
    return first.plan, first.request.correlation_id


def answer(
    corr: str, data: dict[str, Any], *, kind: str = "web.search.completed", event_id: str = "a-1"
) -> EventEnvelope:
    return event(kind, data, corr=corr, event_id=event_id)


def test_default_next_starts_the_plan_and_asks_for_the_first_action() -> None:
    plan = new_plan()
    step = engine.step(plan, None, key="goal-1/default_next")

    assert step.changed and step.entered == "searching"
    assert [n.type for n in step.notices] == [PLAN_STARTED, PLAN_STATE_CHANGED]
    assert step.notices[1].data == {
        "from_state": "start",
        "to_state": "searching",
        "status": PlanStatus.RUNNING,
        "trigger_event": None,
    }
    request = step.request
    assert request is not None
    assert (request.event_type, request.data) == ("web.search.requested", {"query": "owls"})
    assert request.correlation_id == derived_id("plan-1", "goal-1/default_next", "searching")
    assert step.plan.steps.pending == {request.correlation_id: "searching"}
    assert request.correlation_id in step.plan.correlation_ids
    assert step.ending is None
    # The input is left as it was: the step can run again on a fresh copy.
    assert (plan.current_state, plan.status, plan.steps.pending) == ("start", "pending", {})


def test_an_answer_is_recorded_and_the_first_transition_whose_condition_holds_wins() -> None:
    plan, corr = searching()
    few = engine.step(plan, answer(corr, {"pages": 2}), key="a-1")
    many = engine.step(plan, answer(corr, {"pages": 9}), key="a-1")

    assert (few.entered, many.entered) == ("done", "review")
    assert few.plan.results["searching"] == {"pages": 2}
    assert few.plan.steps.pending == {}
    assert [n.type for n in few.notices] == [PLAN_STATE_CHANGED]  # started once, before
    assert few.notices[0].data["trigger_event"] == "web.search.completed"
    assert few.request is None  # "done" has no action


def test_a_terminal_state_with_finish_ends_the_plan_with_the_step_results() -> None:
    plan, corr = searching()
    step = engine.step(plan, answer(corr, {"pages": 2}), key="a-1", finish=True)

    assert step.plan.status == PlanStatus.COMPLETED
    assert step.ending is not None
    assert step.ending.lifecycle_type == PLAN_COMPLETED
    assert step.ending.reply["result"] == {"searching": {"pages": 2}}
    assert step.plan.results["final"] == {"searching": {"pages": 2}}
    # Without finish the plan only moves there; the caller ends it.
    assert engine.step(plan, answer(corr, {"pages": 2}), key="a-1").ending is None


def test_a_failed_terminal_state_says_which_step_got_what() -> None:
    plan, corr = searching()
    failure = answer(corr, {"error": "backend timed out"}, kind="web.search.failed")
    step = engine.step(plan, failure, key="a-1", finish=True)

    assert step.plan.status == PlanStatus.FAILED
    assert step.ending is not None and step.ending.lifecycle_type == PLAN_FAILED
    reason = "step 'searching' got web.search.failed: backend timed out"
    assert step.ending.reply["error"] == reason
    assert step.plan.bookkeeping.failure_reason == reason


def test_a_duplicate_trigger_changes_nothing_and_sends_the_same_request_again() -> None:
    plan = new_plan()
    first = engine.step(plan, None, key="goal-1/default_next")
    again = engine.step(first.plan, None, key="goal-1/default_next")

    assert not again.changed and again.entered is None and again.notices == ()
    assert again.plan is first.plan
    assert again.request == first.request  # re-sent under the same id


def test_a_redelivered_answer_is_applied_once() -> None:
    plan, corr = searching()
    moved = engine.step(plan, answer(corr, {"pages": 2}), key="a-1").plan
    again = engine.step(moved, answer(corr, {"pages": 2}), key="a-1")

    assert not again.changed and again.entered is None and again.request is None


def test_a_late_answer_to_a_step_the_plan_has_left_changes_nothing() -> None:
    plan, corr = searching()
    # The plan moved on (e.g. a timeout) while its search request was still out.
    plan.current_state = "review"
    step = engine.step(plan, answer(corr, {"pages": 2}), key="a-late")

    assert not step.changed and step.entered is None
    assert "searching" not in step.plan.results


def test_a_second_answer_to_a_finished_step_changes_nothing() -> None:
    plan, corr = searching()
    moved = engine.step(plan, answer(corr, {"pages": 9}), key="a-1").plan
    second = engine.step(moved, answer(corr, {"pages": 1}, event_id="a-2"), key="a-2")

    assert not second.changed and second.entered is None
    assert second.plan.results["searching"] == {"pages": 9}


def test_an_event_no_transition_takes_changes_nothing() -> None:
    plan, _ = searching()
    stray = event("weather.report", {}, corr="someone-else", event_id="w-1")
    step = engine.step(plan, stray, key="w-1")

    assert not step.changed and step.entered is None and step.request is None


def test_entering_a_wait_announces_it_and_its_outcomes_are_transitions() -> None:
    plan, corr = searching()
    waiting = engine.step(plan, answer(corr, {"pages": 9}), key="a-1")

    assert waiting.entered == "review"
    assert [n.type for n in waiting.notices] == [PLAN_STATE_CHANGED, PLAN_WAITING_FOR_INPUT]
    assert waiting.notices[1].data == {
        "expected_event": "review.approved",
        "timeout_seconds": 60,
        "reason": "a person checks the pages",
    }
    approved = event("review.approved", {"ok": True}, corr="plan-1", event_id="r-1")
    timed_out = event(PLAN_WAIT_TIMEOUT, {}, corr="plan-1", event_id="t-1")
    assert engine.step(waiting.plan, approved, key="r-1").entered == "done"
    assert engine.step(waiting.plan, timed_out, key="t-1").entered == "failed"


def test_an_initial_state_with_an_action_runs_it_first() -> None:
    machine = {
        "start": StateConfig(
            state_name="start",
            action=StateAction(event_type="quote.requested", response_event="quote.done"),
            transitions=[StateTransition(on_event="quote.done", to_state="done")],
        ),
        "done": StateConfig(state_name="done", is_terminal=True),
    }
    step = engine.step(new_plan(state_machine=machine), None, key=None)

    assert step.entered == "start"
    assert step.request is not None and step.request.event_type == "quote.requested"
    # Outside a handler (no key) the request id derives from the plan's version.
    assert step.request.correlation_id == derived_id("plan-1", "default-0", "start")


def test_an_ended_plan_takes_no_step_but_the_trigger_that_ended_it_gets_its_end_again() -> None:
    plan, corr = searching()
    ended = engine.step(plan, answer(corr, {"pages": 2}), key="a-1", finish=True)

    again = engine.step(ended.plan, answer(corr, {"pages": 2}), key="a-1", finish=True)
    assert not again.changed
    assert again.ending == ended.ending  # announced again, identically

    other = engine.step(ended.plan, answer(corr, {}, event_id="a-9"), key="a-9")
    assert not other.changed and other.ending is None


def test_a_paused_plan_keeps_each_trigger_once_for_its_resume() -> None:
    plan, corr = searching()
    paused = engine.pause(plan, "legal_review").plan
    trigger = answer(corr, {"pages": 2})

    kept = engine.step(paused, trigger, key="a-1")
    assert kept.changed and kept.entered is None
    assert [e["id"] for e in kept.plan.bookkeeping.deferred_events] == ["a-1"]
    assert not engine.step(kept.plan, trigger, key="a-1").changed
    assert not engine.step(kept.plan, None, key=None).changed

    resumed = engine.resume(kept.plan, {"ok": True}).plan
    assert resumed.status == PlanStatus.RUNNING and resumed.results["user_input"] == {"ok": True}
    emptied, deferred = engine.take_deferred(resumed)
    assert emptied.bookkeeping.deferred_events == []
    replayed = engine.step(emptied, EventEnvelope.model_validate(deferred[0]), key="a-1")
    assert replayed.entered == "done"


def test_ends_apply_once() -> None:
    plan, _ = searching()
    cancelled = engine.cancel(plan, "no longer needed", "user-1")
    assert cancelled.changed and cancelled.plan.status == PlanStatus.CANCELLED
    assert cancelled.plan.bookkeeping.cancelled_by == "user-1"
    assert recorded_ending(cancelled.plan) == cancelled.ending

    for end in (
        engine.end(cancelled.plan, {"x": 1}),
        engine.fail(cancelled.plan, "too late"),
        engine.cancel(cancelled.plan, "again", None),
    ):
        assert not end.changed and end.ending is None

    failed = engine.fail(plan, "gave up")
    assert failed.plan.status == PlanStatus.FAILED
    assert recorded_ending(failed.plan) == failed.ending


def test_a_redelivered_event_that_is_no_answer_moves_the_plan_once() -> None:
    # "next" leads on from either state: only the trigger's id tells a redelivery apart.
    machine = {
        "a": StateConfig(
            state_name="a", transitions=[StateTransition(on_event="next", to_state="b")]
        ),
        "b": StateConfig(
            state_name="b", transitions=[StateTransition(on_event="next", to_state="a")]
        ),
    }
    plan = new_plan(state_machine=machine, current_state="a", status=PlanStatus.RUNNING)
    tick = event("next", {}, corr="plan-1", event_id="n-1")
    moved = engine.step(plan, tick, key="n-1")
    assert moved.entered == "b"

    again = engine.step(moved.plan, tick, key="n-1")
    assert not again.changed and again.entered is None
    assert (
        engine.step(moved.plan, event("next", {}, corr="plan-1", event_id="n-2"), key="n-2").entered
        == "a"
    )


def test_a_second_answer_to_an_earlier_request_of_a_looping_state_changes_nothing() -> None:
    machine = {
        "polling": StateConfig(
            state_name="polling",
            action=StateAction(event_type="poll.requested", response_event="poll.done"),
            transitions=[
                StateTransition(on_event="poll.done", to_state="done", condition="data.ready"),
                StateTransition(on_event="poll.done", to_state="polling"),
            ],
        ),
        "done": StateConfig(state_name="done", is_terminal=True),
    }
    first = engine.step(new_plan(state_machine=machine, current_state="polling"), None, key="g")
    assert first.request is not None
    corr = first.request.correlation_id
    again = engine.step(first.plan, event("poll.done", {}, corr=corr, event_id="p-1"), key="p-1")
    assert again.entered == "polling" and again.request is not None
    assert again.request.correlation_id != corr  # a new request for the new visit

    # The tool answered the first request twice (another event id): not a new answer.
    twice = event("poll.done", {"ready": True}, corr=corr, event_id="p-1b")
    step = engine.step(again.plan, twice, key="p-1b")
    assert not step.changed and step.entered is None
