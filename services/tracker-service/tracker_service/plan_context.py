"""The parts of a plan only its memory-service context has: state machine, current state,
results and a ChoreographyPlanner's LLM audit trail and WAIT (from the record's
``bookkeeping``; read acting as the plan's tenant)."""

from __future__ import annotations

from soorma import MemoryClient
from soorma_common.errors import SoormaError
from soorma_common.tracker import LlmAuditRecord, PlanContextView


async def read_plan_context(
    memory: MemoryClient, tenant: str, plan_id: str
) -> tuple[PlanContextView | None, str | None]:
    """``(view, None)``, or ``(None, why)`` when the context cannot be read."""
    try:
        record = await memory.acting_as(tenant_id=tenant).get_plan_context(plan_id)
    except SoormaError as exc:
        return None, f"memory service: {exc}"
    if record is None:
        return None, "the plan has no context in the memory service (finished and pruned?)"
    choreography = record.bookkeeping.choreography
    return PlanContextView(
        status=record.status,
        current_state=record.current_state,
        state_machine=record.state_machine,
        results=record.results,
        llm_audit=[LlmAuditRecord.model_validate(a) for a in choreography.audit]
        if choreography
        else [],
        waiting_for=choreography.waiting_for if choreography else None,
        correlation_ids=record.correlation_ids,
        version=record.version,
    ), None
