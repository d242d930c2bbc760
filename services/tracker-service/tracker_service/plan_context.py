"""The parts of a plan only its memory-service context has: state machine, current state,
results and a ChoreographyPlanner's LLM audit trail and WAIT (from the record's
``bookkeeping``; read acting as the plan's tenant)."""

from __future__ import annotations

from typing import Any

from soorma_common.errors import NotFound, SoormaError
from soorma_common.tracker import LlmAuditRecord, PlanContextView

# Where a memory service older than the record's ``bookkeeping`` field kept them.
AUDIT_KEY = "llm_audit"
WAITING_KEY = "_waiting_for"


async def read_plan_context(
    memory: Any, tenant: str, plan_id: str
) -> tuple[PlanContextView | None, str | None]:
    """``(view, None)``, or ``(None, why)`` when the context cannot be read."""
    try:
        record = await memory._send("GET", f"/v1/memory/plan-context/{plan_id}", tenant_id=tenant)
    except NotFound:
        return None, "the plan has no context in the memory service (finished and pruned?)"
    except SoormaError as exc:
        return None, f"memory service: {exc}"
    if not isinstance(record, dict):
        return None, "memory service answered no plan context"
    state = record.get("state") if isinstance(record.get("state"), dict) else {}
    book = record.get("bookkeeping") if isinstance(record.get("bookkeeping"), dict) else {}
    choreography = book.get("choreography") if isinstance(book.get("choreography"), dict) else {}
    raw_audit = choreography.get("audit") or state.get(AUDIT_KEY) or []
    audit = [LlmAuditRecord.model_validate(a) for a in raw_audit if isinstance(a, dict)]
    waiting = choreography.get("waiting_for") or state.get(WAITING_KEY)
    return PlanContextView(
        status=record.get("status"),
        current_state=record.get("current_state"),
        state_machine=record.get("state_machine") or {},
        results=record.get("results") or {},
        llm_audit=audit,
        waiting_for=waiting if isinstance(waiting, str) else None,
        correlation_ids=record.get("correlation_ids") or [],
        version=record.get("version"),
    ), None
