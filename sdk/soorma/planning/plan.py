"""PlanContext: a planner's durable, event-driven state machine.

A plan lives in the memory service (``context.memory`` plan-context records), so any
replica of a planner, or a restarted one, continues it. :class:`PlanContext` is the thin
shell around the plan engine: it holds the plan (:class:`~soorma.planning.records.
PlanState`), its store (:class:`~soorma.planning.records.PlanRecords`) and the bus. A
step runs the pure step function (:mod:`soorma.planning.engine`) inside
:func:`~soorma._versioned.apply_change` (a conflicting write re-runs it on the fresh
plan, so no transition is lost and none is applied twice), stores the result, then
publishes the events the step returned.

Each action a state publishes gets a correlation id recorded in the plan *before* the
request is sent (see :mod:`soorma.planning.steps`), so the answer always finds its plan
and a redelivered trigger re-sends the same request instead of a second one.

The module is over 400 lines because the public methods document their crash-safety
contracts; the logic they wrap lives in the modules named above.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

from soorma._concurrency import CONFLICT_RETRIES
from soorma._versioned import Change, apply_change
from soorma.agents._cancel import step_cancel_requests
from soorma.planning import engine, transitions
from soorma.planning.cache import PlanCache
from soorma.planning.engine import Request, Step
from soorma.planning.lifecycle import (
    Ending,
    caller_identity,
    end_events,
    lifecycle_event,
    publish,
)
from soorma.planning.machine import as_state_machine, validate_state_machine
from soorma.planning.records import (
    START_STATE,
    PlanRecords,
    PlanState,
    initial_correlations,
    merge_records,
    plan_memory,
)
from soorma.planning.steps import StepLedger, derived_id, goal_plan_id, step_key
from soorma.planning.transitions import FAILED_STATE_NAMES
from soorma_common.bookkeeping import PlanBookkeeping
from soorma_common.events import (
    ACTION_RESULTS,
    PLAN_CANCEL_REQUESTED,
    PLAN_PAUSED,
    PLAN_RESUMED,
    PLAN_STARTED,
    SYSTEM_EVENTS,
    EventEnvelope,
)
from soorma_common.memory import PlanContextRecord, PlanStatus
from soorma_common.state import StateConfig

if TYPE_CHECKING:
    from soorma.context import PlatformContext

DEFAULT_SAVE_RETRIES = CONFLICT_RETRIES

T = TypeVar("T")


class _PlanField(Generic[T]):
    """A :class:`PlanContext` attribute kept in its :class:`PlanState`."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Self: ...
    @overload
    def __get__(self, obj: PlanContext, owner: type) -> T: ...
    def __get__(self, obj: PlanContext | None, owner: type) -> T | Self:
        if obj is None:
            return self
        value: T = getattr(obj._plan, self._name)
        return value

    def __set__(self, obj: PlanContext, value: T) -> None:
        setattr(obj._plan, self._name, value)


def _stored_if_changed(step: Step) -> Change[PlanState, Step]:
    return Change(step.plan if step.changed else None, step)


def _as_is(plan: PlanState) -> Change[PlanState, None]:
    return Change(plan, None)


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
        status: ``pending``, ``running``, ``paused``, ``completed``, ``failed`` or
            ``cancelled``.
        state_machine: State name → :class:`~soorma_common.state.StateConfig`.
        current_state: Where the plan is.
        results: Step results by state name (``results["searching"]``), plus ``final``
            and ``user_input``.
        parent_plan_id: The plan this one is a sub-plan of.
        session_id: Conversation the plan belongs to.
        tenant_id: Tenant of the goal's caller.
        user_id: User of the goal's caller.
        state: The user's free-form plan state (the SDK never writes to it).
        bookkeeping: The SDK's own fields (:class:`~soorma_common.bookkeeping.
            PlanBookkeeping`): ``pause_reason``, ``failure_reason``, and a
            ChoreographyPlanner's ``choreography`` (actions, WAIT, LLM audit trail).
            Read it; the SDK writes it.
        correlation_ids: Correlation ids that lead back to this plan.
        version: Stored version (optimistic concurrency).
    """

    plan_id: _PlanField[str] = _PlanField()
    goal_event: _PlanField[str] = _PlanField()
    goal_data: _PlanField[dict[str, Any]] = _PlanField()
    response_event: _PlanField[str | None] = _PlanField()
    response_topic: _PlanField[str] = _PlanField()
    correlation_id: _PlanField[str | None] = _PlanField()
    status: _PlanField[str] = _PlanField()
    state_machine: _PlanField[dict[str, StateConfig]] = _PlanField()
    current_state: _PlanField[str] = _PlanField()
    results: _PlanField[dict[str, Any]] = _PlanField()
    parent_plan_id: _PlanField[str | None] = _PlanField()
    session_id: _PlanField[str | None] = _PlanField()
    tenant_id: _PlanField[str | None] = _PlanField()
    user_id: _PlanField[str | None] = _PlanField()
    state: _PlanField[dict[str, Any]] = _PlanField()
    bookkeeping: _PlanField[PlanBookkeeping] = _PlanField()
    correlation_ids: _PlanField[list[str]] = _PlanField()
    version: _PlanField[int] = _PlanField()

    def __init__(
        self,
        plan: PlanState,
        context: PlatformContext,
        *,
        cache: PlanCache | None = None,
        cached: bool = False,
    ) -> None:
        self._context = context
        self._records = PlanRecords(plan_memory(context), cache)
        self._adopt(plan)
        # Restored from the cache rather than read: a step that changes nothing on
        # it is checked again on a fresh read before the event is dropped.
        self._cached = cached

    def _adopt(self, plan: PlanState) -> None:
        """Hold ``plan`` (as stored or just read); ``save`` merges relative to it."""
        self._plan = plan
        self._snapshot = plan.copy()
        self._cached = False

    @property
    def platform(self) -> PlatformContext:
        """The platform clients the plan acts through (bus, memory, ...)."""
        return self._context

    @property
    def _steps(self) -> StepLedger:
        """Outstanding requests and applied triggers (the redelivery guard)."""
        return self._plan.steps

    def to_record(self) -> PlanContextRecord:
        """The plan as the memory service stores it."""
        return self._plan.to_record()

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON-ready dict."""
        return self.to_record().model_dump(mode="json")

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
        bookkeeping: PlanBookkeeping | None = None,
        start: bool = False,
        cache: PlanCache | None = None,
    ) -> Self:
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
            state: Initial free-form state (the user's).
            bookkeeping: Initial SDK bookkeeping (e.g. a ChoreographyPlanner's owner).
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
        new = PlanState(
            plan_id=plan_id,
            goal_event=goal_event,
            state_machine=machine,
            current_state=initial_state,
            goal_data=dict(goal_data or {}),
            response_event=response_event,
            response_topic=response_topic,
            correlation_id=correlation_id,
            parent_plan_id=parent_plan_id,
            session_id=session_id,
            tenant_id=tenant_id,
            user_id=user_id,
            state=dict(state or {}),
            bookkeeping=bookkeeping or PlanBookkeeping(),
            correlation_ids=initial_correlations(plan_id, correlation_id, parent_plan_id),
        )
        first = engine.step(new, None, key=None) if start else Step(new)
        records = PlanRecords(plan_memory(context), cache)
        plan = cls(await records.create(first.plan), context, cache=cache)
        if first.entered is not None:
            await plan._announce(first)
        return plan

    @classmethod
    async def restore(cls, plan_id: str, context: PlatformContext) -> Self | None:
        """The stored plan ``plan_id``, or ``None`` when there is none."""
        plan = await PlanRecords(plan_memory(context)).find(plan_id)
        return None if plan is None else cls(plan, context)

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
                return cls(PlanState.from_record(hit), context, cache=cache, cached=True)
        record = await plan_memory(context).get_plan_by_correlation(correlation_id)
        return None if record is None else cls(PlanState.from_record(record), context, cache=cache)

    # -- reading the plan ------------------------------------------------------------

    def is_finished(self) -> bool:
        """Whether the plan has ended (completed, failed or cancelled)."""
        return self._plan.is_finished()

    def at_terminal_state(self) -> bool:
        """Whether the plan is at a terminal state of its machine (or has already ended)."""
        return transitions.at_terminal_state(self._plan)

    def condition_names(self, event: EventEnvelope | None) -> dict[str, Any]:
        """The names a transition condition can use."""
        return transitions.condition_names(self._plan, event)

    def get_next_state(self, event: EventEnvelope) -> str | None:
        """The state ``event`` leads to from the current state, or ``None``.

        The first transition whose ``on_event`` is the event's type and whose
        ``condition`` (if any) holds wins.
        """
        return transitions.next_state(self._plan, event)

    def interpolation_sources(self) -> dict[str, Any]:
        """What ``{...}`` placeholders in action data can reference."""
        return transitions.interpolation_sources(self._plan)

    def step_for(self, event: EventEnvelope) -> str | None:
        """The state whose action ``event`` answers (by correlation id), if pending."""
        return self._steps.pending.get(event.correlation_id or "")

    def is_own_request(self, event: EventEnvelope) -> bool:
        """Whether ``event`` is one of this plan's own action requests (not an answer)."""
        corr = event.correlation_id or ""
        return corr in self._steps.pending and event.id == corr

    def is_own_answer(self, event: EventEnvelope) -> bool:
        """Whether ``event`` is this plan's answer to its goal (not a transition)."""
        return bool(
            self.correlation_id
            and event.correlation_id == self.correlation_id
            and event.type == self.response_event
            and event.correlation_id != self.plan_id
        )

    # -- stepping --------------------------------------------------------------------

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
        key = step_key(trigger_event)
        step = await self._step(
            lambda plan: engine.step(plan, trigger_event, key=key, finish=finish)
        )
        await self._announce(step)
        return step.entered

    async def announce_start(self) -> None:
        """Publish ``plan.started`` for a plan not stepped by :meth:`execute_next`
        (a ChoreographyPlanner plan). Its id derives from the plan id, so announcing
        again (a redelivered goal) is recognisably the same event.
        """
        if not self.is_finished():
            await self._context.bus.publish_event(
                lifecycle_event(
                    self,
                    PLAN_STARTED,
                    {"status": PlanStatus.RUNNING.value},
                    event_id=derived_id(self.plan_id, "started"),
                ),
                **caller_identity(self),
            )

    async def announce_end_again(self) -> None:
        """Publish a finished plan's end and its goal's answer again, under the ids the
        first announcement used (consumers drop the copy). For a redelivered trigger
        whose first handling may have died between storing the end and announcing it.
        """
        if self.is_finished():
            await self._announce_end(transitions.recorded_ending(self._plan))

    async def resend_current_action(self) -> None:
        """Publish the current state's outstanding request again, under the same id.

        For a redelivered trigger whose first handling may have died before sending.
        """
        request = engine.request_for(self._plan, self.current_state)
        if request is not None:
            await publish(self, [self._request_event(request)])

    async def _step(self, change: Callable[[PlanState], Step]) -> Step:
        """Apply the pure ``change`` to the plan and store what it changed."""
        return await self._apply(lambda plan: _stored_if_changed(change(plan)))

    async def _apply(
        self,
        change: Callable[[PlanState], Change[PlanState, T] | Awaitable[Change[PlanState, T]]],
        *,
        retries: int = CONFLICT_RETRIES,
    ) -> T:
        """Apply ``change`` through the versioned store (re-applied to the fresh plan
        after a conflict) and hold the plan it leaves: stored, re-read, or as it was."""
        applied = await apply_change(
            self._records,
            self._plan.plan_id,
            self._plan,
            change,
            verified=not self._cached,
            retries=retries,
            clock=self._context.clock,
        )
        if applied.written or applied.record is not self._plan:
            self._adopt(applied.record)
        return applied.outcome

    async def _announce(self, step: Step) -> None:
        """Publish what ``step`` announces, in one request."""
        if not step.changed and step.ending is not None:
            await self._announce_end(step.ending)  # a stored end, announced again
            return
        events = [lifecycle_event(self, notice.type, notice.data) for notice in step.notices]
        if step.request is not None:
            events.append(self._request_event(step.request))
        if step.ending is not None:
            events.extend(end_events(self, step.ending))
        await publish(self, events)

    def _request_event(self, request: Request) -> EventEnvelope:
        return self._context.bus.build_event(
            request.topic,
            request.event_type,
            request.data,
            correlation_id=request.correlation_id,
            response_event=request.response_event,
            plan_id=self.plan_id,
            session_id=self.session_id,
            event_id=request.correlation_id,
        )

    async def _emit(self, event_type: str, data: dict[str, Any]) -> None:
        await self._context.bus.publish_event(
            lifecycle_event(self, event_type, data), **caller_identity(self)
        )

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
        base, local = self._snapshot.to_record(), self._plan.to_record()

        def rebase(fresh: PlanState) -> PlanState:
            return PlanState.from_record(merge_records(fresh.to_record(), base, local))

        applied = await apply_change(
            self._records,
            self.plan_id,
            self._plan,
            _as_is,
            rebase=rebase,
            retries=retries,
            clock=self._context.clock,
        )
        self._adopt(applied.record)

    async def update(
        self, change: Callable[[Self], Any], *, retries: int = DEFAULT_SAVE_RETRIES
    ) -> None:
        """Apply ``change(plan)`` and save; on a conflict re-read and apply it again.

        ``change`` may be sync or async and may run several times, so it must only
        change the plan (no publishing).
        """

        async def on(plan: PlanState) -> Change[PlanState, None]:
            self._plan = plan  # the copy to change: a fresh one after a conflict
            result = change(self)
            if inspect.isawaitable(result):
                await result
            return Change(self._plan, None)

        await self._apply(on, retries=retries)

    async def reload(self) -> None:
        """Discard local changes and read the stored plan again."""
        self._adopt(await self._records.load(self.plan_id))

    # -- ending, pausing, resuming ---------------------------------------------------

    async def finalize(self, result: Mapping[str, Any] | None = None) -> None:
        """Complete the plan and answer the goal.

        Publishes ``{"plan_id", "status": "completed", "result"}`` as the goal's
        ``response_event`` on its ``response_topic`` with the goal's correlation id;
        for a sub-plan that answer is the parent's step result, so the parent moves
        on through its own transition. A terminal state named like ``failed`` ends
        the plan through :meth:`fail` instead. Calling it again does nothing.
        """
        if not self.is_finished():
            await self._end_once(lambda plan: engine.end(plan, result))

    async def fail(self, reason: str) -> None:
        """End the plan as failed and answer the goal with ``status: failed``."""
        if not self.is_finished():
            await self._end_once(lambda plan: engine.fail(plan, reason))

    async def cancel(self, reason: str, *, by: str | None = None) -> bool:
        """End the plan as cancelled, answer its goal, and ask its sub-plans to cancel.

        The end is stored first (a versioned write, like every step), then announced
        with ``plan.cancelled``, the goal's answer (``status: cancelled``) and one
        ``plan.cancel_requested`` per outstanding step request whose goal opened a
        sub-plan and one ``task.cancel_requested`` per outstanding step request (the
        worker holding it interrupts and cancels it), all under ids derived from the
        plan. Calling it again on a cancelled plan announces the same events again
        (consumers drop the copies), so a cancel request redelivered after a crash
        completes what the first handling began.
        Answers that arrive afterwards change nothing: an ended plan takes no transition.

        Args:
            reason: Why (recorded, and sent with the answer).
            by: Who asked (recorded as ``bookkeeping.cancelled_by``).

        Returns:
            Whether the plan is cancelled (``False``: it had ended otherwise first).
        """
        if not self.is_finished():
            await self._transition_status(lambda plan: engine.cancel(plan, reason, by))
        if self.status != PlanStatus.CANCELLED:
            return False
        ending = transitions.recorded_ending(self._plan)
        requests = [
            self._context.bus.build_event(
                SYSTEM_EVENTS,
                PLAN_CANCEL_REQUESTED,
                {
                    "plan_id": goal_plan_id(corr),
                    "parent_plan_id": self.plan_id,
                    "reason": f"parent plan {self.plan_id} cancelled: {ending.reply['error']}",
                },
                correlation_id=goal_plan_id(corr),
                plan_id=goal_plan_id(corr),
                session_id=self.session_id,
                event_id=derived_id(self.plan_id, "cancel", corr),
            )
            for corr in sorted(self._steps.pending)
        ]
        reason = str(ending.reply["error"])
        tasks = step_cancel_requests(self._context.bus, self, self._steps.pending, reason)
        await publish(self, [*end_events(self, ending), *requests, *tasks])
        return True

    async def _transition_status(self, end: Callable[[PlanState], Step]) -> Ending | None:
        """Store the end ``end`` makes of the plan, unless it has ended already; that
        end (``None``: another writer ended it first)."""
        return (await self._step(end)).ending

    async def _end_once(self, end: Callable[[PlanState], Step]) -> None:
        """End the plan through ``end`` and announce it, unless it has already ended."""
        ending = await self._transition_status(end)
        if ending is not None:
            await self._announce_end(ending)

    async def _announce_end(self, ending: Ending) -> None:
        """Publish the lifecycle event and the goal's answer in one request."""
        await self._context.bus.publish_batch(end_events(self, ending), **caller_identity(self))

    async def pause(self, reason: str = "user_input_required") -> None:
        """Pause the plan (e.g. waiting for an approval); it ignores transitions until
        :meth:`resume`. No timeout: a plan-level pause may last indefinitely."""
        if self.is_finished() or self.status == PlanStatus.PAUSED:
            return
        if (await self._step(lambda plan: engine.pause(plan, reason))).changed:
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
        if (await self._step(lambda plan: engine.resume(plan, data))).changed:
            await self._emit(PLAN_RESUMED, {"status": self.status})
        entered: str | None = None
        if self.bookkeeping.deferred_events:
            deferred = await self._apply(_take_deferred)
            for payload in deferred:
                entered = await self.execute_next(EventEnvelope.model_validate(payload)) or entered
        if entered is None:
            entered = await self.execute_next()
        return entered


def _take_deferred(plan: PlanState) -> Change[PlanState, list[dict[str, Any]]]:
    after, deferred = engine.take_deferred(plan)
    return Change(after, deferred)


__all__ = ["FAILED_STATE_NAMES", "START_STATE", "PlanCache", "PlanContext"]
