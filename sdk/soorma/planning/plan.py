"""PlanContext: a planner's durable, event-driven state machine.

A plan lives in the memory service (``context.memory`` plan-context records), so any
replica of a planner, or a restarted one, continues it. State changes are versioned
writes: when two events for one plan race, the loser re-reads the plan and applies its
transition again on the fresh copy, so no transition is lost and none is applied twice.

Each action a state publishes gets a correlation id recorded in the plan *before* the
request is sent (see :mod:`soorma.planning.steps`), so the answer always finds its plan
and a redelivered trigger re-sends the same request instead of a second one.

The parts live beside this module: persistence (:mod:`~soorma.planning.stored`),
record mapping (:mod:`~soorma.planning.records`), step recording
(:mod:`~soorma.planning.steps`), lifecycle events (:mod:`~soorma.planning.lifecycle`)
and the pure transitions (:mod:`~soorma.planning.transitions`). What remains here is
the engine's I/O: creating a plan, taking a step (store, then publish), ending, pausing
and resuming; it is over 400 lines because those public methods document their
crash-safety contracts.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from soorma._concurrency import retry_on_conflict
from soorma.agents._cancel import step_cancel_requests
from soorma.planning.cache import PlanCache
from soorma.planning.interpolate import interpolate
from soorma.planning.lifecycle import (
    Ending,
    caller_identity,
    end_events,
    lifecycle_event,
    publish,
)
from soorma.planning.machine import as_state_machine, validate_state_machine
from soorma.planning.records import initial_correlations, plan_memory
from soorma.planning.steps import derived_id, goal_plan_id, step_key
from soorma.planning.stored import START_STATE
from soorma.planning.transitions import FAILED_STATE_NAMES, PlanMachine
from soorma_common.bookkeeping import PlanBookkeeping
from soorma_common.events import (
    ACTION_RESULTS,
    PLAN_CANCEL_REQUESTED,
    PLAN_PAUSED,
    PLAN_RESUMED,
    PLAN_STARTED,
    PLAN_STATE_CHANGED,
    PLAN_WAITING_FOR_INPUT,
    SYSTEM_EVENTS,
    EventEnvelope,
)
from soorma_common.memory import PlanContextRecord, PlanStatus
from soorma_common.state import StateConfig

if TYPE_CHECKING:
    from soorma.context import PlatformContext


class PlanContext(PlanMachine):
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
            correlation_ids=initial_correlations(plan_id, correlation_id, parent_plan_id),
            state=dict(state or {}),
            bookkeeping=bookkeeping or PlanBookkeeping(),
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
        stored = await plan_memory(context).store_plan_context(
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
            await self._announce_end(self._recorded_ending())

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
        if await self._announced_again(key):
            return None
        if await self._stopped(trigger_event):
            return None
        was_pending = self.status == PlanStatus.PENDING
        entered: str | None = None
        previous: str | None = None
        moved_status = self.status
        ending: Ending | None = None

        async def write() -> None:
            nonlocal previous, entered, moved_status, ending
            changed, previous, entered = self._apply(trigger_event, key)
            moved_status, ending = self.status, None
            if finish and entered is not None and self.at_terminal_state():
                ending = self._end(self._step_results(), failed_at=previous, trigger=trigger_event)
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
            # Ended meanwhile. If by this very trigger (an earlier attempt stored the
            # end and then died, or lost the service's reply, so this copy was stale),
            # its end may never have been announced.
            await self._announced_again(key)
            return None
        if entered is None:
            seen = self._steps.applied.get(key) if key is not None else None
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

    async def _announced_again(self, key: str | None) -> bool:
        """Announce the end again (same event ids) when the step keyed ``key`` ended the
        plan: a redelivered or re-run trigger whose first handling may have died before
        the end was announced. Whether it did."""
        if self.is_finished() and key is not None and key in self._steps.applied:
            await self._announce_end(self._recorded_ending())
            return True
        return False

    async def _publish_action(
        self,
        state_name: str,
        *,
        lifecycle: list[tuple[str, dict[str, Any]]],
        ending: Ending | None = None,
    ) -> None:
        bus = self._context.bus
        events: list[EventEnvelope] = [
            lifecycle_event(self, event_type, data) for event_type, data in lifecycle
        ]
        wait = self.state_machine[state_name].wait
        if wait is not None and lifecycle:
            events.append(
                lifecycle_event(
                    self,
                    PLAN_WAITING_FOR_INPUT,
                    {
                        "expected_event": wait.event,
                        "timeout_seconds": wait.timeout_seconds,
                        "reason": wait.reason or f"waiting for {wait.event}",
                    },
                )
            )
        action = self.state_machine[state_name].action
        corr = self._steps.correlation_for(state_name)
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
            events.extend(end_events(self, ending))
        await publish(self, events)

    async def resend_current_action(self) -> None:
        """Publish the current state's outstanding request again, under the same id.

        For a redelivered trigger whose first handling may have died before sending.
        """
        if self._steps.correlation_for(self.current_state) is not None:
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
            deferred = plan.bookkeeping.deferred_events
            if all(e.get("id") != trigger.id for e in deferred):
                plan.bookkeeping.deferred_events = [*deferred, payload]

        await self.update(keep)

    async def _emit(self, event_type: str, data: dict[str, Any]) -> None:
        await self._context.bus.publish_event(
            lifecycle_event(self, event_type, data), **caller_identity(self)
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

        def cancelled(plan: PlanContext) -> None:
            plan._cancel_locally(reason, by)

        if not self.is_finished():
            await self._transition_status(cancelled)
        if self.status != PlanStatus.CANCELLED:
            return False
        ending = self._recorded_ending()
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

    async def _end_once(self, end: Callable[[PlanContext], Ending]) -> None:
        """End the plan through ``end`` and announce it, unless it has already ended."""
        if self.is_finished():
            return
        endings: list[Ending] = []

        def change(plan: PlanContext) -> None:
            endings[:] = [end(plan)]

        already = await self._transition_status(change)
        if already:
            return
        await self._announce_end(endings[0])

    async def _announce_end(self, ending: Ending) -> None:
        """Publish the lifecycle event and the goal's answer in one request."""
        await self._context.bus.publish_batch(end_events(self, ending), **caller_identity(self))

    async def pause(self, reason: str = "user_input_required") -> None:
        """Pause the plan (e.g. waiting for an approval); it ignores transitions until
        :meth:`resume`. No timeout: a plan-level pause may last indefinitely."""
        if self.is_finished() or self.status == PlanStatus.PAUSED:
            return

        def paused(plan: PlanContext) -> None:
            plan.bookkeeping.resume_status = str(plan.status)
            plan.status = PlanStatus.PAUSED
            plan.bookkeeping.pause_reason = reason

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
            plan.status = PlanStatus(plan.bookkeeping.resume_status or PlanStatus.RUNNING)
            plan.bookkeeping.resume_status = None
            if plan.status == PlanStatus.PAUSED:
                plan.status = PlanStatus.RUNNING
            plan.bookkeeping.pause_reason = None
            plan.results["user_input"] = data

        deferred: list[dict[str, Any]] = []

        def take_deferred(plan: PlanContext) -> None:
            deferred[:] = plan.bookkeeping.deferred_events
            plan.bookkeeping.deferred_events = []

        await self.update(resumed)
        await self._emit(PLAN_RESUMED, {"status": self.status})
        entered: str | None = None
        if self.bookkeeping.deferred_events:
            await self.update(take_deferred)
            for payload in deferred:
                entered = await self.execute_next(EventEnvelope.model_validate(payload)) or entered
        if entered is None:
            entered = await self.execute_next()
        return entered


class _Stopped(Exception):
    """The plan ended or paused while a step was being retried: take no transition."""


__all__ = ["FAILED_STATE_NAMES", "START_STATE", "PlanCache", "PlanContext"]
