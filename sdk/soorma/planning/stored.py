"""A plan held in memory and written back with versioned writes.

:class:`StoredPlan` is the persistence half of :class:`~soorma.planning.plan.PlanContext`:
reading the record into attributes, writing it back, and the two ways of resolving a
conflicting write (merge the local changes onto the fresh copy, or re-run the change).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Self

from soorma._concurrency import CONFLICT_RETRIES, retry_on_conflict
from soorma.planning.cache import PlanCache
from soorma.planning.machine import as_state_machine
from soorma.planning.records import merge_records, plan_memory
from soorma.planning.steps import StepLedger
from soorma_common.bookkeeping import PlanBookkeeping
from soorma_common.errors import PlanNotFound
from soorma_common.events import ACTION_RESULTS
from soorma_common.memory import PlanContextRecord, PlanStatus
from soorma_common.state import StateConfig

if TYPE_CHECKING:
    from soorma.context import PlatformContext

START_STATE = "start"
DEFAULT_SAVE_RETRIES = CONFLICT_RETRIES
ENDED = (PlanStatus.COMPLETED, PlanStatus.FAILED, PlanStatus.CANCELLED)


class StoredPlan:
    """A plan record as attributes, read from the memory service and written back.

    The attributes are documented on :class:`~soorma.planning.plan.PlanContext`.
    """

    def __init__(
        self,
        record: PlanContextRecord,
        context: PlatformContext,
        *,
        cache: PlanCache | None = None,
        cached: bool = False,
    ) -> None:
        self._context = context
        self._cache = cache
        self._load(record)
        # Restored from the cache rather than read: must be verified before trusting
        # a decision that writes nothing.
        self._cached = cached

    # -- reading and writing the record ----------------------------------------------

    def _stored(self, record: PlanContextRecord) -> None:
        """Adopt the record the memory service just returned for a write."""
        self._load(record)
        if self._cache is not None:
            self._cache.put(record)

    def _load(self, record: PlanContextRecord) -> None:
        self._cached = False
        book = record.bookkeeping
        self.plan_id: str = record.plan_id
        self.goal_event: str = record.goal_event
        self.goal_data: dict[str, Any] = dict(record.goal_data)
        self.response_event: str | None = record.response_event
        self.response_topic: str = book.response_topic or ACTION_RESULTS
        self.correlation_id: str | None = book.correlation_id
        self.status: str = str(record.status)
        self.state_machine: dict[str, StateConfig] = as_state_machine(record.state_machine)
        self.current_state: str = record.current_state or START_STATE
        self.results: dict[str, Any] = dict(record.results)
        self.parent_plan_id: str | None = record.parent_plan_id
        self.session_id: str | None = record.session_id
        self.tenant_id: str | None = book.tenant_id
        self.user_id: str | None = book.user_id
        self.state: dict[str, Any] = dict(record.state)
        # The SDK's own fields; the step ledger and the identity above are kept apart.
        self.bookkeeping: PlanBookkeeping = book.model_copy()
        self.correlation_ids: list[str] = list(record.correlation_ids)
        self.version: int = record.version
        # Outstanding requests and applied triggers (the redelivery guard).
        self._steps = StepLedger(book.pending, book.applied)
        self._snapshot = self.to_record()

    def to_record(self) -> PlanContextRecord:
        """The plan as the memory service stores it."""
        book = self.bookkeeping
        bookkeeping = book.model_copy(
            update={
                "correlation_id": self.correlation_id,
                "response_topic": self.response_topic,
                "tenant_id": self.tenant_id,
                "user_id": self.user_id,
                "pending": dict(self._steps.pending),
                "applied": dict(self._steps.applied),
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

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON-ready dict."""
        return self.to_record().model_dump(mode="json")

    @property
    def platform(self) -> PlatformContext:
        """The platform clients the plan acts through (bus, memory, ...)."""
        return self._context

    # -- restoring and saving --------------------------------------------------------

    @classmethod
    async def restore(cls, plan_id: str, context: PlatformContext) -> Self | None:
        """The stored plan ``plan_id``, or ``None`` when there is none."""
        record = await plan_memory(context).get_plan_context(plan_id)
        return None if record is None else cls(record, context)

    @classmethod
    async def restore_by_correlation(
        cls, correlation_id: str, context: PlatformContext, *, cache: PlanCache | None = None
    ) -> Self | None:
        """The plan one of whose actions (or itself) has ``correlation_id``, or ``None``.

        Args:
            correlation_id: The id an event carries.
            context: Platform clients.
            cache: Try this cache first; the plan's writes then update it. A cached
                plan may be stale until its next write (see :class:`PlanCache`).
        """
        if cache is not None:
            hit = cache.by_correlation(correlation_id)
            if hit is not None:
                return cls(hit, context, cache=cache, cached=True)
        record = await plan_memory(context).get_plan_by_correlation(correlation_id)
        return None if record is None else cls(record, context, cache=cache)

    # -- saving ----------------------------------------------------------------------

    async def save(self, *, retries: int = DEFAULT_SAVE_RETRIES) -> None:
        """Store local changes with a versioned write.

        When another writer got there first, the plan is re-read and this copy's
        changes (fields and individual ``results``/``state``/``goal_data`` keys changed
        since it was loaded) are applied onto the fresh copy, so concurrent handlers
        touching different keys both keep their changes. For read-modify-write logic
        (counters, appends) use :meth:`update`, which re-runs the change instead.

        Raises:
            VersionConflict: still conflicting after ``retries`` re-reads.
            PlanNotFound: the plan was deleted.
        """
        local, base = self.to_record(), self._snapshot
        record = local

        async def write() -> None:
            self._stored(
                await plan_memory(self._context).replace_plan_context(
                    record, expected_version=record.version
                )
            )

        async def reread() -> None:
            nonlocal record
            fresh = await plan_memory(self._context).get_plan_context(self.plan_id)
            if fresh is None:
                raise PlanNotFound(f"plan {self.plan_id} was deleted") from None
            record = merge_records(fresh, base, local)

        await retry_on_conflict(write, reread, retries=retries)

    async def update(
        self, change: Callable[[Self], Any], *, retries: int = DEFAULT_SAVE_RETRIES
    ) -> None:
        """Apply ``change(plan)`` and save; on a conflict re-read and apply it again.

        ``change`` may be sync or async and may run several times, so it must only
        change the plan (no publishing).
        """

        async def write() -> None:
            result = change(self)
            if isinstance(result, Awaitable):
                await result
            await self._write()

        await retry_on_conflict(write, self.reload, retries=retries)

    async def reload(self) -> None:
        """Discard local changes and read the stored plan again."""
        record = await plan_memory(self._context).get_plan_context(self.plan_id)
        if record is None:
            raise PlanNotFound(f"plan {self.plan_id} does not exist (deleted or pruned)")
        self._load(record)

    async def _write(self) -> None:
        """Store this copy if the stored version is still the one it was read at
        (``VersionConflict`` otherwise: see :func:`retry_on_conflict`)."""
        stored = await plan_memory(self._context).replace_plan_context(
            self.to_record(), expected_version=self.version
        )
        self._stored(stored)

    async def _transition_status(self, change: Callable[[Self], None]) -> bool:
        """Apply a status change exactly once; True when another writer finished first."""

        async def write() -> bool:
            if self.is_finished():
                return True
            change(self)
            await self._write()
            return False

        return await retry_on_conflict(write, self.reload)

    def is_finished(self) -> bool:
        """Whether the plan has ended (completed, failed or cancelled)."""
        return self.status in ENDED
