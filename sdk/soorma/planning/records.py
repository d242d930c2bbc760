"""A plan as data (:class:`PlanState`), as the memory service stores it, and its store.

The SDK's own fields (the goal's correlation id and response topic, the caller's
identity, the step ledger, pause and failure reasons, a ChoreographyPlanner's
bookkeeping) are the record's ``bookkeeping``; ``state`` holds only the user's keys.
:class:`PlanRecords` is the plans' :class:`~soorma._versioned.VersionedStore`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soorma.planning.machine import as_state_machine
from soorma.planning.steps import StepLedger
from soorma_common.bookkeeping import PlanBookkeeping
from soorma_common.errors import PlanNotFound
from soorma_common.events import ACTION_RESULTS
from soorma_common.memory import PlanContextRecord, PlanStatus
from soorma_common.state import StateConfig

if TYPE_CHECKING:
    from soorma.context import PlatformContext
    from soorma.memory import MemoryClient
    from soorma.planning.cache import PlanCache

START_STATE = "start"
ENDED = (PlanStatus.COMPLETED, PlanStatus.FAILED, PlanStatus.CANCELLED)


@dataclass(eq=False)
class PlanState:
    """One plan as plain data: what the pure step (:mod:`soorma.planning.engine`) reads
    and returns. The fields are documented on :class:`~soorma.planning.plan.PlanContext`;
    ``steps`` is the step ledger (outstanding requests, applied triggers)."""

    plan_id: str
    goal_event: str
    state_machine: dict[str, StateConfig]
    current_state: str = START_STATE
    status: str = PlanStatus.PENDING.value
    goal_data: dict[str, Any] = field(default_factory=dict)
    response_event: str | None = None
    response_topic: str = ACTION_RESULTS
    correlation_id: str | None = None
    results: dict[str, Any] = field(default_factory=dict)
    parent_plan_id: str | None = None
    session_id: str | None = None
    tenant_id: str | None = None
    user_id: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    bookkeeping: PlanBookkeeping = field(default_factory=PlanBookkeeping)
    correlation_ids: list[str] = field(default_factory=list)
    version: int = 0
    steps: StepLedger = field(default_factory=StepLedger)

    @classmethod
    def from_record(cls, record: PlanContextRecord) -> PlanState:
        """The plan a stored record holds."""
        book = record.bookkeeping
        return cls(
            plan_id=record.plan_id,
            goal_event=record.goal_event,
            goal_data=dict(record.goal_data),
            response_event=record.response_event,
            response_topic=book.response_topic or ACTION_RESULTS,
            correlation_id=book.correlation_id,
            status=str(record.status),
            state_machine=as_state_machine(record.state_machine),
            current_state=record.current_state or START_STATE,
            results=dict(record.results),
            parent_plan_id=record.parent_plan_id,
            session_id=record.session_id,
            tenant_id=book.tenant_id,
            user_id=book.user_id,
            state=dict(record.state),
            bookkeeping=book.model_copy(),
            correlation_ids=list(record.correlation_ids),
            version=record.version,
            steps=StepLedger(book.pending, book.applied),
        )

    def to_record(self) -> PlanContextRecord:
        """The plan as the memory service stores it."""
        book = self.bookkeeping
        bookkeeping = book.model_copy(
            update={
                "correlation_id": self.correlation_id,
                "response_topic": self.response_topic,
                "tenant_id": self.tenant_id,
                "user_id": self.user_id,
                "pending": dict(self.steps.pending),
                "applied": dict(self.steps.applied),
                "deferred_events": list(book.deferred_events),
                # Shallow: the SDK replaces its fields rather than changing them in place.
                "choreography": book.choreography.model_copy() if book.choreography else None,
            }
        )
        return PlanContextRecord(
            plan_id=self.plan_id,
            session_id=self.session_id,
            parent_plan_id=self.parent_plan_id,
            goal_event=self.goal_event,
            goal_data=self.goal_data,
            response_event=self.response_event,
            status=PlanStatus(self.status),
            current_state=self.current_state,
            state_machine={
                name: cfg.model_dump(mode="json", exclude_none=True)
                for name, cfg in self.state_machine.items()
            },
            results=self.results,
            correlation_ids=self.correlation_ids,
            state=dict(self.state),
            bookkeeping=bookkeeping,
            version=self.version,
        )

    def copy(self) -> PlanState:
        """A copy whose containers can change without touching this one (the state
        machine, never changed by a step, is shared)."""
        return PlanState(
            plan_id=self.plan_id,
            goal_event=self.goal_event,
            state_machine=self.state_machine,
            current_state=self.current_state,
            status=self.status,
            goal_data=dict(self.goal_data),
            response_event=self.response_event,
            response_topic=self.response_topic,
            correlation_id=self.correlation_id,
            results=dict(self.results),
            parent_plan_id=self.parent_plan_id,
            session_id=self.session_id,
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            state=copy.copy(self.state),
            bookkeeping=self.bookkeeping.model_copy(),
            correlation_ids=list(self.correlation_ids),
            version=self.version,
            steps=StepLedger(self.steps.pending, self.steps.applied),
        )

    def is_finished(self) -> bool:
        """Whether the plan has ended (completed, failed or cancelled)."""
        return self.status in ENDED


class PlanRecords:
    """Plans in the memory service, as :class:`PlanState`: the plans'
    :class:`~soorma._versioned.VersionedStore`. With a ``cache``, every plan it stores
    is remembered there."""

    def __init__(self, memory: MemoryClient, cache: PlanCache | None = None) -> None:
        self._memory = memory
        self.cache = cache

    async def find(self, plan_id: str) -> PlanState | None:
        """The stored plan ``plan_id``, or ``None``."""
        record = await self._memory.get_plan_context(plan_id)
        return None if record is None else PlanState.from_record(record)

    async def load(self, plan_id: str) -> PlanState:
        """The stored plan ``plan_id`` (``PlanNotFound`` when there is none)."""
        plan = await self.find(plan_id)
        if plan is None:
            raise PlanNotFound(f"plan {plan_id} does not exist (deleted or pruned)")
        return plan

    async def create(self, plan: PlanState) -> PlanState:
        """Store a new plan (``VersionConflict`` when ``plan_id`` is taken)."""
        record = await self._memory.store_plan_context(
            plan.plan_id, plan.session_id, plan.to_record(), expected_version=0
        )
        return self._stored(record)

    async def replace(self, plan: PlanState, *, expected_version: int) -> PlanState:
        """Store ``plan`` if the stored version is still ``expected_version``."""
        record = await self._memory.replace_plan_context(
            plan.to_record(), expected_version=expected_version
        )
        return self._stored(record)

    def _stored(self, record: PlanContextRecord) -> PlanState:
        if self.cache is not None:
            self.cache.put(record)
        return PlanState.from_record(record)


_MISSING = object()


def initial_correlations(
    plan_id: str, goal_correlation: str | None, parent_plan_id: str | None
) -> list[str]:
    """A new plan's correlation ids: its own id and, for a top-level goal, the goal's.

    The goal's correlation id lets callers find the plan (memory ``by-correlation``).
    A sub-plan's goal correlation id is its parent's pending request, so it must keep
    leading to the parent and is not listed.
    """
    ids = [plan_id]
    if goal_correlation and goal_correlation != plan_id and parent_plan_id is None:
        ids.append(goal_correlation)
    return ids


def merge_records(
    fresh: PlanContextRecord, base: PlanContextRecord, local: PlanContextRecord
) -> PlanContextRecord:
    """``fresh`` with the changes ``local`` made relative to ``base`` applied."""
    merged = fresh.model_copy(deep=True)
    for name in (
        "status",
        "current_state",
        "response_event",
        "session_id",
        "parent_plan_id",
        "goal_event",
        "state_machine",
    ):
        if getattr(local, name) != getattr(base, name):
            setattr(merged, name, getattr(local, name))
    for name in ("results", "state", "goal_data"):
        target = dict(getattr(merged, name))
        before, after = getattr(base, name), getattr(local, name)
        for key in before.keys() - after.keys():
            target.pop(key, None)
        for key, value in after.items():
            if before.get(key, _MISSING) != value:
                target[key] = value
        setattr(merged, name, target)
    merged.bookkeeping = _merge_bookkeeping(merged.bookkeeping, base.bookkeeping, local.bookkeeping)
    added = [c for c in local.correlation_ids if c not in base.correlation_ids]
    removed = set(base.correlation_ids) - set(local.correlation_ids)
    merged.correlation_ids = [c for c in merged.correlation_ids if c not in removed] + [
        c for c in added if c not in merged.correlation_ids
    ]
    return merged


def _merge_bookkeeping(
    fresh: PlanBookkeeping, base: PlanBookkeeping, local: PlanBookkeeping
) -> PlanBookkeeping:
    """``fresh`` with the bookkeeping fields ``local`` changed relative to ``base``."""
    changed = {
        name: getattr(local, name)
        for name in PlanBookkeeping.model_fields
        if getattr(local, name) != getattr(base, name)
    }
    return fresh.model_copy(update=changed) if changed else fresh


def plan_memory(context: PlatformContext) -> MemoryClient:
    """The memory client plans are stored with.

    Raises:
        RuntimeError: the context has no memory client.
    """
    memory = context.memory
    if memory is None:
        raise RuntimeError(
            "plans need context.memory (the memory service); build the context with "
            "PlatformContext.from_env() and set SOORMA_MEMORY_URL"
        )
    return memory
