"""PlanContext: a planner's durable, event-driven state machine (seed 000, RF-SDK-006).

A plan lives in the memory service (``context.memory`` plan-context records), so any
replica of a planner, or a restarted one, continues it. State changes are versioned
writes: when two events for one plan race, the loser re-reads the plan and applies its
transition again on the fresh copy, so no transition is lost and none is applied twice.

Each action a state publishes gets a fresh correlation id, recorded in the plan's
``correlation_ids`` *before* the request is sent, so the answer always finds its plan
(``restore_by_correlation``). Ids are derived from (plan, triggering event, state): when
a planner dies between saving and publishing, the redelivered trigger re-publishes the
same request id instead of a second one.

Fields the memory record has no column for (the goal's correlation id and response topic,
the caller's identity, which correlation id belongs to which state) are kept under
``state["_plan"]``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from soorma._concurrency import CONFLICT_RETRIES, retry_on_conflict
from soorma._propagation import current_event
from soorma.planning.cache import DEFAULT_CACHE_PLANS, PlanCache
from soorma.planning.conditions import evaluate_condition
from soorma.planning.interpolate import interpolate
from soorma.planning.machine import CONDITION_NAMES, as_state_machine, validate_state_machine
from soorma_common.errors import PlanNotFound
from soorma_common.events import ACTION_RESULTS, SYSTEM_EVENTS, EventEnvelope
from soorma_common.memory import PlanContextRecord, PlanStatus
from soorma_common.state import StateConfig

if TYPE_CHECKING:
    from soorma.context import PlatformContext
    from soorma.memory import MemoryClient

logger = logging.getLogger("soorma.plan")

START_STATE = "start"
DEFAULT_SAVE_RETRIES = CONFLICT_RETRIES
# Triggers remembered per plan for the redelivery guard (oldest dropped first).
APPLIED_MEMORY = 200
# Terminal states with these names end the plan as failed rather than completed.
FAILED_STATE_NAMES = frozenset({"failed", "failure", "error", "aborted", "cancelled"})
_META = "_plan"
_ID_NAMESPACE = uuid.UUID("6f1f4c2e-58a8-4f43-9b0e-5b1c0c1a9d21")

PLAN_STARTED = "plan.started"
PLAN_STATE_CHANGED = "plan.state_changed"
PLAN_PAUSED = "plan.paused"
PLAN_RESUMED = "plan.resumed"
PLAN_COMPLETED = "plan.completed"
PLAN_FAILED = "plan.failed"

Mutation = Callable[["PlanContext"], Any]


def _derived_id(*parts: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, "/".join(parts)))


def _step_key(trigger: EventEnvelope | None) -> str | None:
    """What a step is keyed by: its trigger's id; without a trigger, the event being
    handled (a ``default_next`` step taken for it), else nothing (outside a handler)."""
    if trigger is not None:
        return trigger.id
    handled = current_event()
    return None if handled is None else f"{handled.id}/default_next"


def _initial_correlations(
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


class PlanContext:
    """One plan: its goal, state machine, position and results, persisted in memory.

    Build one with :meth:`create` (new plan) or :meth:`restore` /
    :meth:`restore_by_correlation` (existing plan); do not call the constructor
    directly.

    Attributes:
        plan_id: The plan's id.
        goal_event: Event type of the goal that started the plan.
        goal_data: The goal's payload.
        response_event: Event type :meth:`finalize` answers the goal with.
        response_topic: Topic of that answer.
        correlation_id: The goal's correlation id (carried by the answer).
        status: ``pending``, ``running``, ``paused``, ``completed`` or ``failed``.
        state_machine: State name → :class:`~soorma_common.state.StateConfig`.
        current_state: Where the plan is.
        results: Step results by state name (``results["searching"]``), plus ``final``
            and ``user_input``.
        parent_plan_id: The plan this one is a sub-plan of.
        session_id: Conversation the plan belongs to.
        tenant_id: Tenant of the goal's caller.
        user_id: User of the goal's caller.
        state: Free-form plan state for handlers (``pause_reason`` …).
        correlation_ids: Correlation ids that lead back to this plan.
        version: Stored version (optimistic concurrency).
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

    # -- (de)serialisation -----------------------------------------------------------

    def _stored(self, record: PlanContextRecord) -> None:
        """Adopt the record the memory service just returned for a write."""
        self._load(record)
        if self._cache is not None:
            self._cache.put(record)

    def _load(self, record: PlanContextRecord) -> None:
        self._cached = False
        state = dict(record.state)
        meta = dict(state.pop(_META, {}) or {})
        self.plan_id: str = record.plan_id
        self.goal_event: str = record.goal_event
        self.goal_data: dict[str, Any] = dict(record.goal_data)
        self.response_event: str | None = record.response_event
        self.response_topic: str = meta.get("response_topic") or ACTION_RESULTS
        self.correlation_id: str | None = meta.get("correlation_id")
        self.status: str = str(record.status)
        self.state_machine: dict[str, StateConfig] = as_state_machine(record.state_machine)
        self.current_state: str = record.current_state or START_STATE
        self.results: dict[str, Any] = dict(record.results)
        self.parent_plan_id: str | None = record.parent_plan_id
        self.session_id: str | None = record.session_id
        self.tenant_id: str | None = meta.get("tenant_id")
        self.user_id: str | None = meta.get("user_id")
        self.state: dict[str, Any] = state
        self.correlation_ids: list[str] = list(record.correlation_ids)
        self.version: int = record.version
        # Which state each outstanding action's correlation id belongs to.
        self._pending: dict[str, str] = dict(meta.get("pending") or {})
        # Trigger event id -> state it led to (redelivery guard, bounded).
        self._applied: dict[str, str] = dict(meta.get("applied") or {})
        self._snapshot = self.to_record()

    def to_record(self) -> PlanContextRecord:
        """The plan as the memory service stores it."""
        meta = {
            "correlation_id": self.correlation_id,
            "response_topic": self.response_topic,
            "tenant_id": self.tenant_id,
            "user_id": self.user_id,
            "pending": self._pending,
            "applied": self._applied,
        }
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
            state={**self.state, _META: meta},
            version=self.version,
        )

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON-ready dict."""
        return self.to_record().model_dump(mode="json")

    @property
    def context(self) -> PlatformContext:
        """The platform context the plan acts through."""
        return self._context

    # -- creating and restoring ------------------------------------------------------

    @classmethod
    async def create(
        cls,
        context: PlatformContext,
        *,
        goal_event: str,
        goal_data: Mapping[str, Any] | None = None,
        state_machine: Mapping[str, StateConfig | Mapping[str, Any]],
        response_event: str | None = None,
        response_topic: str = ACTION_RESULTS,
        correlation_id: str | None = None,
        plan_id: str | None = None,
        parent_plan_id: str | None = None,
        session_id: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        initial_state: str = START_STATE,
        state: Mapping[str, Any] | None = None,
        start: bool = False,
        cache: PlanCache | None = None,
    ) -> PlanContext:
        """Create and store a new plan (status ``pending``, at ``initial_state``).

        Args:
            context: Platform clients (``context.memory`` is required).
            goal_event: The goal's event type.
            goal_data: The goal's payload (``{goal_data.x}`` placeholders read it).
            state_machine: State name → ``StateConfig`` (or its dict form).
            response_event: Event type :meth:`finalize` answers with.
            response_topic: Topic for that answer.
            correlation_id: The goal's correlation id, carried by the answer.
            plan_id: Plan id (a new UUID when omitted).
            parent_plan_id: Parent plan, for nested plans.
            session_id: Conversation the plan belongs to.
            tenant_id: Tenant of the goal's caller (recorded).
            user_id: User of the goal's caller (recorded).
            initial_state: Where the plan starts (``"start"``).
            state: Initial free-form state.
            start: Also take the first step (as :meth:`execute_next` would) in the
                same write, and publish its action: one round trip less per plan.
            cache: See :meth:`restore_by_correlation`.

        Raises:
            ValueError: the state machine references unknown states or has bad
                conditions.
            VersionConflict: a plan with ``plan_id`` already exists.
        """
        machine = as_state_machine(state_machine)
        validate_state_machine(machine, initial_state)
        plan_id = plan_id or str(uuid.uuid4())
        record = PlanContextRecord(
            plan_id=plan_id,
            session_id=session_id,
            parent_plan_id=parent_plan_id,
            goal_event=goal_event,
            goal_data=dict(goal_data or {}),
            response_event=response_event,
            status=PlanStatus.PENDING,
            current_state=initial_state,
            state_machine={},
            results={},
            correlation_ids=_initial_correlations(plan_id, correlation_id, parent_plan_id),
            state=dict(state or {}),
        )
        plan = cls(record, context, cache=cache)
        plan.state_machine = machine
        plan.response_topic = response_topic
        plan.correlation_id = correlation_id
        plan.tenant_id = tenant_id
        plan.user_id = user_id
        previous = entered = None
        if start:
            _, previous, entered = plan._apply(None)
        stored = await _memory(context).store_plan_context(
            plan_id, session_id, plan.to_record(), expected_version=0
        )
        plan._stored(stored)
        if entered is not None:
            await plan._publish_action(
                entered,
                lifecycle=[
                    (PLAN_STARTED, {"status": PlanStatus.RUNNING.value}),
                    (
                        PLAN_STATE_CHANGED,
                        {
                            "from_state": previous,
                            "to_state": entered,
                            "status": plan.status,
                            "trigger_event": None,
                        },
                    ),
                ],
            )
        return plan

    @classmethod
    async def restore(cls, plan_id: str, context: PlatformContext) -> PlanContext | None:
        """The stored plan ``plan_id``, or ``None`` when there is none."""
        record = await _memory(context).get_plan_context(plan_id)
        return None if record is None else cls(record, context)

    @classmethod
    async def restore_by_correlation(
        cls, correlation_id: str, context: PlatformContext, *, cache: PlanCache | None = None
    ) -> PlanContext | None:
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
        record = await _memory(context).get_plan_by_correlation(correlation_id)
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
                await _memory(self._context).replace_plan_context(
                    record, expected_version=record.version
                )
            )

        async def reread() -> None:
            nonlocal record
            fresh = await _memory(self._context).get_plan_context(self.plan_id)
            if fresh is None:
                raise PlanNotFound(f"plan {self.plan_id} was deleted") from None
            record = _merge(fresh, base, local)

        await retry_on_conflict(write, reread, retries=retries)

    async def update(self, change: Mutation, *, retries: int = DEFAULT_SAVE_RETRIES) -> None:
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
        record = await _memory(self._context).get_plan_context(self.plan_id)
        if record is None:
            raise PlanNotFound(f"plan {self.plan_id} does not exist (deleted or pruned)")
        self._load(record)

    # -- the state machine -----------------------------------------------------------

    def condition_names(self, event: EventEnvelope | None) -> dict[str, Any]:
        """The names a transition condition can use."""
        return {
            "data": event.data if event is not None else {},
            "event": event.model_dump(mode="json") if event is not None else {},
            "results": self.results,
            "goal_data": self.goal_data,
            "state": self.state,
        }

    def get_next_state(self, event: EventEnvelope) -> str | None:
        """The state ``event`` leads to from the current state, or ``None``.

        The first transition whose ``on_event`` is the event's type and whose
        ``condition`` (if any) holds wins.
        """
        config = self.state_machine.get(self.current_state)
        if config is None:
            return None
        names: dict[str, Any] | None = None
        for transition in config.transitions:
            if transition.on_event != event.type:
                continue
            if transition.condition:
                names = names or self.condition_names(event)
                if not evaluate_condition(transition.condition, names):
                    continue
            return transition.to_state
        return None

    def is_complete(self) -> bool:
        """Whether the plan is in a terminal state (or already finished)."""
        if self.status in (PlanStatus.COMPLETED, PlanStatus.FAILED, PlanStatus.CANCELLED):
            return True
        config = self.state_machine.get(self.current_state)
        return bool(config and config.is_terminal)

    def is_finished(self) -> bool:
        """Whether :meth:`finalize` or :meth:`fail` already ran."""
        return self.status in (PlanStatus.COMPLETED, PlanStatus.FAILED, PlanStatus.CANCELLED)

    def step_for(self, event: EventEnvelope) -> str | None:
        """The state whose action ``event`` answers (by correlation id), if pending."""
        return self._pending.get(event.correlation_id or "")

    def is_own_request(self, event: EventEnvelope) -> bool:
        """Whether ``event`` is one of this plan's own action requests (not an answer)."""
        corr = event.correlation_id or ""
        return corr in self._pending and event.id == corr

    def is_own_answer(self, event: EventEnvelope) -> bool:
        """Whether ``event`` is this plan's answer to its goal (not a transition)."""
        return bool(
            self.correlation_id
            and event.correlation_id == self.correlation_id
            and event.type == self.response_event
            and event.correlation_id != self.plan_id
        )

    def _apply(
        self, trigger: EventEnvelope | None, key: str | None = None
    ) -> tuple[bool, str | None, str | None]:
        """Advance the local copy for ``trigger``: (changed, from_state, entered_state).

        ``key`` names the step (the trigger's id, or the handled event's for a
        ``default_next`` step): a key already applied changes nothing.
        Pure (no I/O): it is re-run on a fresh copy after a version conflict.
        """
        changed = False
        if key is not None and key in self._applied:
            return False, None, None  # already applied by an earlier delivery
        if trigger is not None:
            corr = trigger.correlation_id or ""
            step = self._pending.get(corr)
            if step is not None:
                if step != self.current_state:
                    return False, None, None  # late answer to a step the plan has left
                self.results[step] = trigger.data
                del self._pending[corr]
                changed = True
            elif corr in self.correlation_ids and corr != self.plan_id:
                return False, None, None  # duplicate answer to a finished step
            next_state = self.get_next_state(trigger)
        else:
            config = self.state_machine.get(self.current_state)
            next_state = config.default_next if config else None
            starting = self.status == PlanStatus.PENDING
            if config is not None and config.action is not None and starting:
                # An initial state with its own action: run it rather than move on.
                next_state = self.current_state
        if next_state is None or next_state not in self.state_machine:
            return changed, None, None
        previous = self.current_state
        self.current_state = next_state
        if self.status == PlanStatus.PENDING:
            self.status = PlanStatus.RUNNING
        target = self.state_machine[next_state]
        if target.action is not None:
            seed = key if key is not None else f"default-{self.version}"
            corr = _derived_id(self.plan_id, seed, next_state)
            self._pending[corr] = next_state
            if corr not in self.correlation_ids:
                self.correlation_ids.append(corr)
        if key is not None:
            self._remember(key, next_state)
        return True, previous, next_state

    def _recorded_ending(self) -> _Ending:
        """The end of a finished plan, rebuilt from what it stored."""
        if self.status == PlanStatus.COMPLETED:
            return _Ending(
                PLAN_COMPLETED,
                {"status": PlanStatus.COMPLETED.value},
                {
                    "plan_id": self.plan_id,
                    "status": "completed",
                    "result": self.results.get("final"),
                },
            )
        reason = str(self.state.get("failure_reason") or self.status)
        return _Ending(
            PLAN_FAILED,
            {"status": str(self.status), "reason": reason},
            {"plan_id": self.plan_id, "status": "failed", "error": reason},
        )

    async def announce_start(self) -> None:
        """Publish ``plan.started`` for a plan not stepped by :meth:`execute_next`
        (a ChoreographyPlanner plan). Its id derives from the plan id, so announcing
        again (a redelivered goal) is recognisably the same event.
        """
        if not self.is_finished():
            await self._context.bus.publish_event(
                self._lifecycle_event(
                    PLAN_STARTED,
                    {"status": PlanStatus.RUNNING.value},
                    event_id=_derived_id(self.plan_id, "started"),
                ),
                **self._identity(),
            )

    async def announce_end_again(self) -> None:
        """Publish a finished plan's end and its goal's answer again, under the ids the
        first announcement used (consumers drop the copy). For a redelivered trigger
        whose first handling may have died between storing the end and announcing it.
        """
        if self.is_finished():
            await self._announce_end(self._recorded_ending())

    def _remember(self, trigger_id: str, state_name: str) -> None:
        self._applied[trigger_id] = state_name
        while len(self._applied) > APPLIED_MEMORY:
            self._applied.pop(next(iter(self._applied)))

    def _action_correlation(self, state_name: str) -> str | None:
        for corr, name in reversed(list(self._pending.items())):
            if name == state_name:
                return corr
        return None

    async def execute_next(
        self, trigger_event: EventEnvelope | None = None, *, finish: bool = False
    ) -> str | None:
        """Take the transition ``trigger_event`` selects (or ``default_next`` without one).

        Records the answered step's result under ``results[<state>]``, moves to the
        next state, stores the plan (re-applying on a conflicting write) and publishes
        the new state's action with a fresh correlation id, ``plan_id`` set, and
        ``{goal_data.x}`` / ``{results.<state>.<field>}`` placeholders filled.

        Args:
            trigger_event: The event to apply (``None``: take ``default_next``).
            finish: When the state entered is terminal, also end the plan in the same
                write, as :meth:`finalize` with the step results would (or
                :meth:`fail`, for a state named like ``failed``), and publish the
                state change, the end and the goal's answer in one request.

        Returns:
            The state entered, or ``None`` when the event leads nowhere (no matching
            transition, a duplicate delivery, or a late answer to a step the plan has
            left).
        """
        key = _step_key(trigger_event)
        if self.is_finished() and key is not None and key in self._applied:
            # The step that ended the plan, redelivered: its handling may have died
            # before the end was announced. Announce it again (same event ids).
            await self._announce_end(self._recorded_ending())
            return None
        if await self._stopped(trigger_event):
            return None
        was_pending = self.status == PlanStatus.PENDING
        entered: str | None = None
        previous: str | None = None
        moved_status = self.status
        ending: _Ending | None = None

        async def write() -> None:
            nonlocal previous, entered, moved_status, ending
            changed, previous, entered = self._apply(trigger_event, key)
            moved_status, ending = self.status, None
            if finish and entered is not None and self.is_complete():
                ending = self._end(self._step_results())
            if not changed and self._cached:
                # Nothing to do by a possibly stale copy: ask the service before
                # dropping the event (the fresh copy is not cached: this runs once).
                await reread()
                await write()
            elif changed:
                await self._write()

        async def reread() -> None:
            await self.reload()
            if await self._stopped(trigger_event):
                raise _Stopped

        try:
            await retry_on_conflict(write, reread)
        except _Stopped:
            return None
        if entered is None:
            seen = self._applied.get(key) if key is not None else None
            if seen is not None and seen == self.current_state:
                # A redelivered trigger applied by an earlier attempt that may have died
                # before sending: re-send that step's request under the same id.
                await self._publish_action(self.current_state, lifecycle=[])
            return None
        lifecycle: list[tuple[str, dict[str, Any]]] = []
        if was_pending:
            lifecycle.append((PLAN_STARTED, {"status": PlanStatus.RUNNING.value}))
        lifecycle.append(
            (
                PLAN_STATE_CHANGED,
                {
                    "from_state": previous,
                    "to_state": entered,
                    "status": moved_status,
                    "trigger_event": trigger_event.type if trigger_event else None,
                },
            )
        )
        await self._publish_action(entered, lifecycle=lifecycle, ending=ending)
        return entered

    def _step_results(self) -> dict[str, Any]:
        """What the declarative driver answers a goal with: the step results."""
        return {k: v for k, v in self.results.items() if k != "final"}

    def _end(self, result: Mapping[str, Any] | None) -> _Ending:
        """End the local copy as :meth:`finalize` would; the events announcing it.

        Pure (no I/O), like :meth:`_apply`: it is re-run on a fresh copy after a
        version conflict.
        """
        if self.current_state.lower() in FAILED_STATE_NAMES:
            reason = (result or {}).get("reason") if isinstance(result, Mapping) else None
            return self._fail_locally(str(reason or f"plan reached state {self.current_state!r}"))
        final = dict(result) if result is not None else None
        self.status = PlanStatus.COMPLETED
        self.results["final"] = final
        return _Ending(
            PLAN_COMPLETED,
            {"status": PlanStatus.COMPLETED.value},
            {"plan_id": self.plan_id, "status": "completed", "result": final},
        )

    async def _publish_action(
        self,
        state_name: str,
        *,
        lifecycle: list[tuple[str, dict[str, Any]]],
        ending: _Ending | None = None,
    ) -> None:
        bus = self._context.bus
        events: list[EventEnvelope] = [
            self._lifecycle_event(event_type, data) for event_type, data in lifecycle
        ]
        action = self.state_machine[state_name].action
        corr = self._action_correlation(state_name)
        if action is not None and corr is not None:
            data = interpolate(action.data or {}, self.interpolation_sources())
            events.append(
                bus.build_event(
                    action.topic,
                    action.event_type,
                    data,
                    correlation_id=corr,
                    response_event=action.response_event,
                    plan_id=self.plan_id,
                    session_id=self.session_id,
                    event_id=corr,
                )
            )
        if ending is not None:
            events.extend(self._end_events(ending))
        if len(events) == 1:
            await bus.publish_event(events[0], **self._identity())
        elif events:
            await bus.publish_batch(events, **self._identity())

    async def resend_current_action(self) -> None:
        """Publish the current state's outstanding request again, under the same id.

        For a redelivered trigger whose first handling may have died before sending.
        """
        if self._action_correlation(self.current_state) is not None:
            await self._publish_action(self.current_state, lifecycle=[])

    def interpolation_sources(self) -> dict[str, Any]:
        """What ``{...}`` placeholders in action data can reference."""
        return {
            "goal_data": self.goal_data,
            "results": self.results,
            "state": self.state,
            "plan_id": self.plan_id,
            "session_id": self.session_id,
        }

    def _identity(self) -> dict[str, str | None]:
        # Inside a handler the bus already acts as the handled event's tenant, and with
        # a token the claims decide; the recorded caller identity only covers plans
        # driven from outside a handler in dev mode.
        if current_event() is not None or self._context.bus.identity.token:
            return {}
        return {"tenant_id": self.tenant_id, "user_id": self.user_id}

    async def _stopped(self, trigger_event: EventEnvelope | None) -> bool:
        """True when the plan takes no transition now: it has ended, or it is paused
        (then ``trigger_event`` is kept for :meth:`resume`)."""
        if self.is_finished():
            return True
        if self.status == PlanStatus.PAUSED:
            if trigger_event is not None:
                await self._defer(trigger_event)
            return True
        return False

    async def _defer(self, trigger: EventEnvelope) -> None:
        """Keep an event that arrived while paused; :meth:`resume` replays it."""
        payload = trigger.model_dump(mode="json")

        def keep(plan: PlanContext) -> None:
            deferred = plan.state.setdefault("deferred_events", [])
            if all(e.get("id") != trigger.id for e in deferred):
                deferred.append(payload)

        await self.update(keep)

    def _lifecycle_event(
        self, event_type: str, data: dict[str, Any], *, event_id: str | None = None
    ) -> EventEnvelope:
        payload = {"plan_id": self.plan_id, "current_state": self.current_state, **data}
        if event_type == PLAN_STARTED and self.goal_event:
            payload["goal_event"] = self.goal_event
        if self.parent_plan_id:
            payload["parent_plan_id"] = self.parent_plan_id
        return self._context.bus.build_event(
            SYSTEM_EVENTS,
            event_type,
            payload,
            correlation_id=self.plan_id,
            plan_id=self.plan_id,
            session_id=self.session_id,
            event_id=event_id,
        )

    async def _emit(self, event_type: str, data: dict[str, Any]) -> None:
        await self._context.bus.publish_event(
            self._lifecycle_event(event_type, data), **self._identity()
        )

    # -- ending, pausing, resuming ---------------------------------------------------

    async def finalize(self, result: Mapping[str, Any] | None = None) -> None:
        """Complete the plan and answer the goal.

        Publishes ``{"plan_id", "status": "completed", "result"}`` as the goal's
        ``response_event`` on its ``response_topic`` with the goal's correlation id;
        for a sub-plan that answer is the parent's step result, so the parent moves
        on through its own transition. A terminal state named like ``failed`` ends
        the plan through :meth:`fail` instead. Calling it again does nothing.
        """
        await self._end_once(lambda plan: plan._end(result))

    async def fail(self, reason: str) -> None:
        """End the plan as failed and answer the goal with ``status: failed``."""
        await self._end_once(lambda plan: plan._fail_locally(reason))

    async def _end_once(self, end: Callable[[PlanContext], _Ending]) -> None:
        """End the plan through ``end`` and announce it, unless it has already ended."""
        if self.is_finished():
            return
        endings: list[_Ending] = []

        def change(plan: PlanContext) -> None:
            endings[:] = [end(plan)]

        already = await self._transition_status(change)
        if already:
            return
        await self._announce_end(endings[0])

    def _fail_locally(self, reason: str) -> _Ending:
        self.status = PlanStatus.FAILED
        self.state["failure_reason"] = reason
        return _Ending(
            PLAN_FAILED,
            {"status": PlanStatus.FAILED.value, "reason": reason},
            {"plan_id": self.plan_id, "status": "failed", "error": reason},
        )

    async def _write(self) -> None:
        """Store this copy if the stored version is still the one it was read at
        (``VersionConflict`` otherwise: see :func:`retry_on_conflict`)."""
        stored = await _memory(self._context).replace_plan_context(
            self.to_record(), expected_version=self.version
        )
        self._stored(stored)

    async def _transition_status(self, change: Callable[[PlanContext], None]) -> bool:
        """Apply a status change exactly once; True when another writer finished first."""

        async def write() -> bool:
            if self.is_finished():
                return True
            change(self)
            await self._write()
            return False

        return await retry_on_conflict(write, self.reload)

    async def _announce_end(self, ending: _Ending) -> None:
        """Publish the lifecycle event and the goal's answer in one request."""
        await self._context.bus.publish_batch(self._end_events(ending), **self._identity())

    def _end_events(self, ending: _Ending) -> list[EventEnvelope]:
        """The end's lifecycle event, and the goal's answer when it asked for one."""
        # Ids derived from the plan: an end announced again is recognisably the same.
        events = [
            self._lifecycle_event(
                ending.lifecycle_type,
                ending.lifecycle_data,
                event_id=_derived_id(self.plan_id, "end", ending.lifecycle_type),
            )
        ]
        if self.response_event:
            events.append(
                self._context.bus.build_event(
                    self.response_topic,
                    self.response_event,
                    ending.reply,
                    correlation_id=self.correlation_id or self.plan_id,
                    plan_id=self.parent_plan_id or self.plan_id,
                    session_id=self.session_id,
                    event_id=_derived_id(self.plan_id, "answer"),
                )
            )
        else:
            logger.info("plan %s ended; its goal asked for no response", self.plan_id)
        return events

    async def pause(self, reason: str = "user_input_required") -> None:
        """Pause the plan (e.g. waiting for an approval); it ignores transitions until
        :meth:`resume`. No timeout: a plan-level pause may last indefinitely."""
        if self.is_finished() or self.status == PlanStatus.PAUSED:
            return

        def paused(plan: PlanContext) -> None:
            plan.state["resume_status"] = plan.status
            plan.status = PlanStatus.PAUSED
            plan.state["pause_reason"] = reason

        await self.update(paused)
        await self._emit(PLAN_PAUSED, {"status": PlanStatus.PAUSED.value, "reason": reason})

    async def resume(self, input_data: Mapping[str, Any] | None = None) -> str | None:
        """Resume a paused plan with ``input_data`` (stored as ``results["user_input"]``).

        Then runs :meth:`execute_next` without a trigger: the current state's
        ``default_next`` (if any) is taken.

        Returns:
            The state entered, if any.
        """
        if self.status != PlanStatus.PAUSED:
            return None
        data = dict(input_data or {})

        def resumed(plan: PlanContext) -> None:
            plan.status = PlanStatus(plan.state.pop("resume_status", PlanStatus.RUNNING))
            if plan.status == PlanStatus.PAUSED:
                plan.status = PlanStatus.RUNNING
            plan.state.pop("pause_reason", None)
            plan.results["user_input"] = data

        deferred: list[dict[str, Any]] = []

        def take_deferred(plan: PlanContext) -> None:
            deferred[:] = plan.state.pop("deferred_events", [])

        await self.update(resumed)
        await self._emit(PLAN_RESUMED, {"status": self.status})
        entered: str | None = None
        if self.state.get("deferred_events"):
            await self.update(take_deferred)
            for payload in deferred:
                entered = await self.execute_next(EventEnvelope.model_validate(payload)) or entered
        if entered is None:
            entered = await self.execute_next()
        return entered


def _memory(context: PlatformContext) -> MemoryClient:
    memory = context.memory
    if memory is None:
        raise RuntimeError(
            "plans need context.memory (the memory service); build the context with "
            "PlatformContext.from_env() and set SOORMA_MEMORY_URL"
        )
    return memory


class _Stopped(Exception):
    """The plan ended or paused while a step was being retried: take no transition."""


@dataclass(frozen=True, slots=True)
class _Ending:
    """How a plan ended: its lifecycle event and the answer to its goal."""

    lifecycle_type: str
    lifecycle_data: dict[str, Any]
    reply: dict[str, Any]


def _merge(
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
    added = [c for c in local.correlation_ids if c not in base.correlation_ids]
    removed = set(base.correlation_ids) - set(local.correlation_ids)
    merged.correlation_ids = [c for c in merged.correlation_ids if c not in removed] + [
        c for c in added if c not in merged.correlation_ids
    ]
    return merged


_MISSING = object()


__all__ = [
    "CONDITION_NAMES",
    "DEFAULT_CACHE_PLANS",
    "PLAN_COMPLETED",
    "PLAN_FAILED",
    "PLAN_PAUSED",
    "PLAN_RESUMED",
    "PLAN_STARTED",
    "PLAN_STATE_CHANGED",
    "START_STATE",
    "PlanCache",
    "PlanContext",
    "validate_state_machine",
]
