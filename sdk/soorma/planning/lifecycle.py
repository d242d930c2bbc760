"""A plan's lifecycle events (``plan.*`` on ``system-events``) and the answer to its goal.

Ends are announced under ids derived from the plan, so an end announced again (after a
crash between storing it and announcing it) is recognisably the same event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from soorma._propagation import current_event
from soorma.planning.steps import derived_id
from soorma_common.events import (
    PLAN_CANCELLED,
    PLAN_COMPLETED,
    PLAN_FAILED,
    PLAN_STARTED,
    SYSTEM_EVENTS,
    EventEnvelope,
)
from soorma_common.memory import PlanStatus

if TYPE_CHECKING:
    from soorma.planning.plan import PlanContext

logger = logging.getLogger("soorma.plan")


@dataclass(frozen=True, slots=True)
class Ending:
    """How a plan ended: its lifecycle event and the answer to its goal."""

    lifecycle_type: str
    lifecycle_data: dict[str, Any]
    reply: dict[str, Any]

    @classmethod
    def completed(cls, plan_id: str, result: Any) -> Ending:
        """The end of a plan that completed with ``result``."""
        return cls(
            PLAN_COMPLETED,
            {"status": PlanStatus.COMPLETED.value},
            {"plan_id": plan_id, "status": "completed", "result": result},
        )

    @classmethod
    def failed(cls, plan_id: str, reason: str, status: str = PlanStatus.FAILED.value) -> Ending:
        """The end of a plan that failed for ``reason``."""
        return cls(
            PLAN_FAILED,
            {"status": status, "reason": reason},
            {"plan_id": plan_id, "status": "failed", "error": reason},
        )

    @classmethod
    def cancelled(cls, plan_id: str, reason: str, by: str | None) -> Ending:
        """The end of a plan cancelled by ``by`` for ``reason``."""
        status = PlanStatus.CANCELLED.value
        return cls(
            PLAN_CANCELLED,
            {"status": status, "reason": reason, "cancelled_by": by},
            {"plan_id": plan_id, "status": status, "error": reason, "cancelled_by": by},
        )


def caller_identity(plan: PlanContext) -> dict[str, str | None]:
    """The identity to publish a plan's events as, outside a handler in dev mode.

    Inside a handler the bus already acts as the handled event's tenant, and with a
    token the claims decide; the recorded caller identity only covers plans driven
    from outside a handler in dev mode.
    """
    if current_event() is not None or plan.platform.bus.identity.token:
        return {}
    return {"tenant_id": plan.tenant_id, "user_id": plan.user_id}


def lifecycle_event(
    plan: PlanContext, event_type: str, data: dict[str, Any], *, event_id: str | None = None
) -> EventEnvelope:
    """A ``plan.*`` event about ``plan`` carrying ``data``."""
    payload = {"plan_id": plan.plan_id, "current_state": plan.current_state, **data}
    if event_type == PLAN_STARTED and plan.goal_event:
        payload["goal_event"] = plan.goal_event
    if plan.parent_plan_id:
        payload["parent_plan_id"] = plan.parent_plan_id
    return plan.platform.bus.build_event(
        SYSTEM_EVENTS,
        event_type,
        payload,
        correlation_id=plan.plan_id,
        plan_id=plan.plan_id,
        session_id=plan.session_id,
        event_id=event_id,
    )


def end_events(plan: PlanContext, ending: Ending) -> list[EventEnvelope]:
    """The end's lifecycle event, and the goal's answer when it asked for one."""
    events = [
        lifecycle_event(
            plan,
            ending.lifecycle_type,
            ending.lifecycle_data,
            event_id=derived_id(plan.plan_id, "end", ending.lifecycle_type),
        )
    ]
    if plan.response_event:
        events.append(
            plan.platform.bus.build_event(
                plan.response_topic,
                plan.response_event,
                ending.reply,
                correlation_id=plan.correlation_id or plan.plan_id,
                plan_id=plan.parent_plan_id or plan.plan_id,
                session_id=plan.session_id,
                event_id=derived_id(plan.plan_id, "answer"),
            )
        )
    else:
        logger.info("plan %s ended; its goal asked for no response", plan.plan_id)
    return events


async def publish(plan: PlanContext, events: list[EventEnvelope]) -> None:
    """Publish ``events`` in one request (none: nothing)."""
    bus = plan.platform.bus
    if len(events) == 1:
        await bus.publish_event(events[0], **caller_identity(plan))
    elif events:
        await bus.publish_batch(events, **caller_identity(plan))
