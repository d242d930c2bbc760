from __future__ import annotations

import pytest
from pydantic import ValidationError

from soorma_common.decisions import PlanAction, PlannerDecision
from soorma_common.errors import VersionConflict, error_from_payload
from soorma_common.events import EventEnvelope, dead_letter_topic
from soorma_common.memory import TaskContextRecord


def test_envelope_serializes_snake_case_and_accepts_camel_case() -> None:
    env = EventEnvelope.model_validate(
        {
            "type": "x.requested",
            "topic": "action-requests",
            "correlationId": "c1",
            "responseEvent": "x.done",
        }
    )
    dumped = env.model_dump(mode="json")
    assert dumped["correlation_id"] == "c1"
    assert dumped["response_event"] == "x.done"
    assert dumped["response_topic"] == "action-results"
    assert dumped["specversion"] == "1.0"
    assert env.id


@pytest.mark.parametrize("topic", ["Bad", "-x", "has space", "a" * 65, ""])
def test_envelope_rejects_bad_topic_names(topic: str) -> None:
    with pytest.raises(ValidationError, match="topic"):
        EventEnvelope(type="x", topic=topic)


def test_dead_letter_topic_name() -> None:
    assert dead_letter_topic("action-requests") == "action-requests.dlq"
    assert dead_letter_topic("a.dlq") == "a.dlq"


def test_planner_decision_is_a_discriminated_union() -> None:
    for payload, action in [
        ({"action": "publish", "event_type": "e", "reasoning": "r"}, PlanAction.PUBLISH),
        ({"action": "complete", "result": {}, "reasoning": "r"}, PlanAction.COMPLETE),
        ({"action": "wait", "reason": "r", "expected_event": "e"}, PlanAction.WAIT),
        (
            {
                "action": "delegate",
                "target_planner": "p",
                "goal_event": "g",
                "goal_data": {},
                "reasoning": "r",
            },
            PlanAction.DELEGATE,
        ),
    ]:
        decision = PlannerDecision.model_validate(
            {"plan_id": "p", "current_state": "s", "reasoning": "r", "next_action": payload}
        )
        assert decision.next_action.action == action
    with pytest.raises(ValidationError):
        PlannerDecision.model_validate(
            {
                "plan_id": "p",
                "current_state": "s",
                "reasoning": "r",
                "next_action": {"action": "explode"},
            }
        )


def test_task_context_keeps_sub_tasks_typed() -> None:
    rec = TaskContextRecord.model_validate(
        {
            "task_id": "t",
            "subTasks": {"s1": {"sub_task_id": "s1", "event_type": "a", "response_event": "b"}},
        }
    )
    assert rec.sub_tasks["s1"].status == "pending"


def test_error_codes_map_back_to_classes() -> None:
    err = error_from_payload({"error": {"code": "version_conflict", "message": "stale"}})
    assert isinstance(err, VersionConflict)
    assert err.message == "stale"
