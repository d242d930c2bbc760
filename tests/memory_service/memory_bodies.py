"""Request bodies shared by the memory-service tests."""

from __future__ import annotations

from typing import Any


def sub_task(sub_task_id: str, *, group: str | None = None) -> dict[str, Any]:
    return {
        "sub_task_id": sub_task_id,
        "event_type": "research.requested",
        "response_event": "research.completed",
        "parallel_group_id": group,
    }


def task_body(task_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "plan_id": "plan-1",
        "event_type": "analyze.requested",
        "correlation_id": f"corr-{task_id}",
        "response_event": "analyze.completed",
        "data": {"topic": "solar"},
        **extra,
    }


def plan_body(plan_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "plan_id": plan_id,
        "goal_event": "research.goal",
        "goal_data": {"topic": "solar"},
        "response_event": "research.done",
        "status": "running",
        "current_state": "start",
        **extra,
    }
