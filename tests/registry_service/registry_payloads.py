"""Builders for registry request bodies used across the registry-service tests."""

from __future__ import annotations

from typing import Any

ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "items": {"type": "array"}},
    "required": ["order_id"],
}
RESULT_SCHEMA = {"type": "object", "properties": {"valid": {"type": "boolean"}}}


def event(name: str, **extra: Any) -> dict[str, Any]:
    return {"event_name": name, "description": f"{name} event", **extra}


def capability(
    task: str, consumes: str, produces: list[str] | None = None, **consumed_extra: Any
) -> dict[str, Any]:
    return {
        "task_name": task,
        "description": f"does {task}",
        "consumed_event": event(consumes, **consumed_extra),
        "produced_events": [event(p, topic="action-results") for p in (produces or [])],
    }


def agent(agent_id: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "agent_id": agent_id,
        "name": name or agent_id,
        "description": f"{agent_id} agent",
        **extra,
    }


def order_validator(agent_id: str = "validator-1", **extra: Any) -> dict[str, Any]:
    """An agent with one capability whose events carry schemas."""
    return agent(
        agent_id,
        "order-validator",
        version="2.1.0",
        capabilities=[
            {
                "task_name": "validate_order",
                "description": "Checks an order",
                "consumed_event": event("order.validate", payload_schema=ORDER_SCHEMA),
                "produced_events": [
                    event("order.validated", topic="action-results", payload_schema=RESULT_SCHEMA)
                ],
            }
        ],
        **extra,
    )
