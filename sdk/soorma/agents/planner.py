"""Planner: goals in, durable state machines out (layer 4).

(Slightly over 400 lines: ``GoalContext``, ``TransitionContext`` and the ``Planner``
decorators are the public surface of one concept and document their redelivery rules.)

``@planner.on_goal("research.goal")`` receives a :class:`GoalContext` for each goal
request on ``action-requests``; the handler usually creates a
:class:`~soorma.PlanContext` and calls ``execute_next()``.
``@planner.on_transition()`` receives a :class:`TransitionContext` for every event on
``action-results`` / ``action-requests`` (or the ``transition_topics`` given) whose
correlation id leads to a known plan; events of unknown plans are ignored.

For the common case no handlers are needed::

    planner = Planner(name="research-planner", plan_definition=PlanDefinition(
        plan_type="research.goal", states=RESEARCH_STATES))

runs the machine: goal → plan → first action; each answer → result recorded → next
state's action; a terminal state → ``finalize()`` (or ``fail()`` for ``failed``). Such a
planner's stream carries only what can move its machine: its goals, and the event types
its transitions name, on ``action-results`` (not its own step requests on
``action-requests``, nor the final answers it sends).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, TypeVar, Unpack

from soorma._names import check_event_type
from soorma.agents._handlers import HandlerSpec, check_handler, make_spec, placeholder
from soorma.agents.base import Agent, AgentArguments
from soorma.context import PlatformContext
from soorma.event import Event
from soorma.planning.cache import PlanCache
from soorma.planning.plan import PlanContext
from soorma.planning.records import START_STATE
from soorma.planning.steps import goal_plan_id
from soorma_common.errors import VersionConflict
from soorma_common.events import (
    ACTION_REQUESTS,
    ACTION_RESULTS,
    PLAN_CANCEL_REQUESTED,
    PLAN_WAIT_TIMEOUT,
    SYSTEM_EVENTS,
)
from soorma_common.memory import PlanStatus
from soorma_common.registry import AgentCapability, EventDefinition
from soorma_common.state import PlanDefinition, StateConfig

logger = logging.getLogger("soorma.planner")

GoalHandler = Callable[[Any, Any], Awaitable[Any]]
G = TypeVar("G", bound=GoalHandler)

# A hand-written on_transition() sees every event on both topics: answers, and requests
# other agents send on the plan's behalf.
DEFAULT_TRANSITION_TOPICS = (ACTION_RESULTS, ACTION_REQUESTS)
# A plan_definition's machine moves on answers; requests (its own step requests
# included) never answer a step, so it does not read them unless asked to.
DEFINITION_TRANSITION_TOPICS = (ACTION_RESULTS,)


@dataclass(frozen=True, slots=True)
class GoalContext:
    """A goal request, as passed to an ``on_goal`` handler.

    Attributes:
        goal_id: Id of the goal event.
        event_type: The goal's event type.
        data: The goal's payload.
        correlation_id: Correlation id the final answer carries.
        response_event: Event type the caller wants the final answer as.
        response_topic: Topic of that answer.
        session_id: Conversation the goal belongs to.
        parent_plan_id: The plan that sent this goal (nested plans), if any.
        tenant_id: Caller's tenant.
        user_id: Caller's user.
        event: The full goal event.
    """

    goal_id: str
    event_type: str
    data: dict[str, Any]
    correlation_id: str | None
    response_event: str | None
    response_topic: str = ACTION_RESULTS
    session_id: str | None = None
    parent_plan_id: str | None = None
    tenant_id: str | None = None
    user_id: str | None = None
    event: Event | None = field(default=None, repr=False)

    @classmethod
    def from_event(cls, event: Event) -> GoalContext:
        """Build the goal from its request event (``plan_id`` = the parent plan)."""
        return cls(
            goal_id=event.id,
            event_type=event.type,
            data=dict(event.data),
            correlation_id=event.correlation_id or event.id,
            response_event=event.response_event,
            response_topic=event.response_topic or ACTION_RESULTS,
            session_id=event.session_id,
            parent_plan_id=event.plan_id,
            tenant_id=event.tenant_id,
            user_id=event.user_id,
            event=event,
        )

    @property
    def requirements(self) -> list[str]:
        """Capabilities the goal asks for (``data["requirements"]``), for discovery."""
        value = self.data.get("requirements") or []
        return [str(v) for v in value] if isinstance(value, list) else [str(value)]

    def plan_id_for(self) -> str:
        """A plan id derived from the goal: a redelivered goal finds its plan again."""
        return goal_plan_id(self.goal_id)

    async def open_plan(
        self,
        context: PlatformContext,
        state_machine: Mapping[str, StateConfig | Mapping[str, Any]],
        *,
        plan_id: str | None = None,
        initial_state: str = START_STATE,
        start: bool = False,
        cache: PlanCache | None = None,
    ) -> PlanContext:
        """Create (and store) the plan for this goal; a redelivered goal gets its plan.

        The plan answers this goal on :meth:`PlanContext.finalize`, and is a sub-plan
        of the plan that sent the goal, if any. ``start`` takes the first step in the
        same write (see :meth:`PlanContext.create`).

        The plan id derives from the goal event's id, so when the goal is delivered
        again (its first handling died before the ack) the plan it created is restored
        and returned as it is now: ``execute_next()`` on it then does nothing new for
        this goal (it re-sends the first step's request under the same id).

        Raises:
            VersionConflict: ``plan_id`` names a plan that exists but could not be read.
        """
        plan_id = plan_id or self.plan_id_for()
        try:
            return await PlanContext.create(
                context,
                goal_event=self.event_type,
                goal_data=self.data,
                state_machine=state_machine,
                response_event=self.response_event,
                response_topic=self.response_topic,
                correlation_id=self.correlation_id,
                plan_id=plan_id,
                parent_plan_id=self.parent_plan_id,
                session_id=self.session_id,
                tenant_id=self.tenant_id,
                user_id=self.user_id,
                initial_state=initial_state,
                start=start,
                cache=cache,
            )
        except VersionConflict:
            existing = await PlanContext.restore(plan_id, context)
            if existing is None:
                raise
            if start and existing.status == PlanStatus.RUNNING:
                # The first step was stored; its request may not have gone out.
                await existing.resend_current_action()
            return existing


@dataclass(frozen=True, slots=True)
class TransitionContext:
    """An event that belongs to a plan, as passed to an ``on_transition`` handler.

    Attributes:
        event: The event (an answer, a HITL reply, a correlated fact …).
        plan: The plan it belongs to, freshly restored from memory.
    """

    event: Event
    plan: PlanContext

    @property
    def step(self) -> str | None:
        """The state whose action this event answers, if it answers one."""
        return self.plan.step_for(self.event)


class Planner(Agent):
    """An agent that turns goals into durable state-machine plans.

    Args:
        plan_definition: A state machine to run for every goal of type
            ``plan_definition.plan_type`` without writing handlers (see module doc).
        goal_description: Description of the goal capability (registry).
        transition_topics: Topics whose correlated events drive transitions.
            Default: ``action-results`` and ``action-requests`` for a hand-written
            :meth:`on_transition` handler, only ``action-results`` for the
            ``plan_definition`` driver. Add e.g. ``business-facts`` or
            ``notification-events`` for replies published there.
        transition_event_types: Event types the ``plan_definition`` driver listens
            for (default: the ``on_event`` of every transition of its machine). Widen
            it (e.g. ``["*"]``) when goals you add with :meth:`on_goal` run other
            machines through the same driver.
        **kwargs: See :class:`~soorma.agents.base.Agent`.
    """

    agent_type = "planner"

    def __init__(
        self,
        *,
        plan_definition: PlanDefinition | None = None,
        goal_description: str = "",
        transition_topics: Sequence[str] | None = None,
        transition_event_types: Sequence[str] | None = None,
        **kwargs: Unpack[AgentArguments],
    ) -> None:
        super().__init__(**kwargs)
        if transition_topics is None:
            transition_topics = (
                DEFAULT_TRANSITION_TOPICS
                if plan_definition is None
                else DEFINITION_TRANSITION_TOPICS
            )
        self.transition_topics = list(dict.fromkeys(transition_topics))
        self.plan_definition = plan_definition
        self._has_transition_handler = False
        # Planners whose plans wait (ChoreographyPlanner WAIT, or a machine with a
        # transition on plan.wait_timeout) also hear the tracker's timeouts.
        self.listens_for_wait_timeout = plan_definition is not None and any(
            t.on_event == PLAN_WAIT_TIMEOUT
            for cfg in plan_definition.states.values()
            for t in cfg.transitions
        )
        self._goal_events: list[str] = []
        # Every on_goal pattern (globs too): a plan whose goal matches none of them was
        # created by another planner of the tenant, and its answers are not ours to step.
        self._goal_patterns: list[str] = []
        # Plans this process wrote last, so answers skip the by-correlation read.
        self.plan_cache = PlanCache()
        self._add_handler(
            HandlerSpec(
                topic=SYSTEM_EVENTS,
                event_type=PLAN_CANCEL_REQUESTED,
                func=self._cancel_requested,
                name=f"{self.name} cancel",
            )
        )
        if plan_definition is not None:
            states = plan_definition.states
            from soorma.planning.machine import validate_state_machine

            validate_state_machine(states, plan_definition.initial_state)

            async def run_goal(goal: GoalContext, context: PlatformContext) -> None:
                await self.run_state_machine(
                    goal, states, context, initial_state=plan_definition.initial_state
                )

            async def drive(transition: TransitionContext, context: PlatformContext) -> None:
                await self.advance(transition)

            run_goal.__qualname__ = f"{plan_definition.plan_type} goal"
            drive.__qualname__ = f"{plan_definition.plan_type} transition"
            self.on_goal(
                plan_definition.plan_type,
                description=goal_description or plan_definition.description,
            )(run_goal)
            if transition_event_types is None:
                transition_event_types = (
                    sorted({t.on_event for cfg in states.values() for t in cfg.transitions}) or None
                )
            self.on_transition(use_cache=True, event_types=transition_event_types)(drive)

    # -- decorators ------------------------------------------------------------------

    def on_goal(
        self, event_type: str, *, description: str = "", topic: str = ACTION_REQUESTS
    ) -> Callable[[G], G]:
        """Register ``async def handler(goal: GoalContext, context)`` for goal requests.

        The goal event becomes a registered capability of the planner.

        Raises:
            TypeError: the handler is not ``async def f(goal, context)``.
            ValueError: invalid topic or empty event type.
        """
        checked = make_spec(
            topic=topic, event_type=event_type, func=placeholder, decorator="on_goal()"
        )

        def decorator(func: G) -> G:
            check_handler(func, params=("goal", "context"), decorator="on_goal()")

            async def handle(event: Event, context: PlatformContext) -> None:
                await func(GoalContext.from_event(event), context)

            self._add_handler(
                HandlerSpec(
                    topic=checked.topic,
                    event_type=checked.event_type,
                    func=handle,
                    name=getattr(func, "__qualname__", repr(func)),
                )
            )
            if event_type not in self._goal_patterns:
                self._goal_patterns.append(event_type)
            if event_type not in self._goal_events and "*" not in event_type:
                self._goal_events.append(event_type)
                self.capabilities.append(
                    AgentCapability(
                        task_name=event_type,
                        description=description or self.description,
                        consumed_event=EventDefinition(
                            event_name=event_type, topic=topic, description=description
                        ),
                    )
                )
            return func

        return decorator

    def on_transition(
        self, *, use_cache: bool = False, event_types: Sequence[str] | None = None
    ) -> Callable[[G], G]:
        """Register ``async def handler(transition: TransitionContext, context)``.

        Called for each event on the transition topics whose ``correlation_id`` leads
        to a stored plan (restored by correlation). Fresh requests (their correlation
        id is their own id, so nothing can be waiting for them) and the plans' own
        action requests are skipped; so are events of unknown plans.

        Args:
            use_cache: Restore plans this process wrote from :attr:`plan_cache`
                (one read less per event). Such a copy may be stale until its next
                write; :meth:`PlanContext.execute_next` copes (guarded writes, and a
                fresh read before ignoring an event), so it suits handlers that only
                call :meth:`advance` / ``execute_next``.
            event_types: Only these event types (globs) reach the handler; the
                service filters the rest out of the planner's stream. Default: all.

        Raises:
            TypeError: the handler is not ``async def f(transition, context)``.
            ValueError: an empty or non-string event type.
            RuntimeError: a second ``on_transition`` handler.
        """
        patterns = ["*"] if event_types is None else list(dict.fromkeys(event_types))
        if not patterns:
            raise ValueError("on_transition(event_types=...) needs at least one event type")
        for pattern in patterns:
            try:
                check_event_type(pattern, what="on_transition() event type")
            except ValueError:
                raise ValueError(
                    f"on_transition() event types must be non-empty strings such as "
                    f"'order.*', got {pattern!r}"
                ) from None

        def decorator(func: G) -> G:
            check_handler(func, params=("transition", "context"), decorator="on_transition()")
            if self._has_transition_handler:
                raise RuntimeError(
                    f"planner {self.name!r} already has an on_transition() handler; "
                    "dispatch on transition.plan / transition.event inside one handler"
                )
            self._has_transition_handler = True

            async def handle(event: Event, context: PlatformContext) -> None:
                if not event.correlation_id:
                    return
                if event.topic == ACTION_REQUESTS and (
                    event.correlation_id == event.id or event.type in self._goal_events
                ):
                    return  # a new request or goal: nothing can be waiting for it
                plan = await PlanContext.restore_by_correlation(
                    event.correlation_id, context, cache=self.plan_cache if use_cache else None
                )
                if plan is None or plan.is_own_request(event) or plan.is_own_answer(event):
                    return
                if not self.owns(plan):
                    return  # another planner's plan (same tenant, same memory service)
                await func(TransitionContext(event=event, plan=plan), context)

            # One record per (topic, pattern): the agent's dispatch runs every matching
            # record, so overlapping patterns are collapsed to "*" first.
            routes = [
                (topic, pattern)
                for topic in self.transition_topics
                for pattern in (["*"] if "*" in patterns else patterns)
            ]
            if self.listens_for_wait_timeout and SYSTEM_EVENTS not in self.transition_topics:
                routes.append((SYSTEM_EVENTS, PLAN_WAIT_TIMEOUT))
            for topic, pattern in routes:
                self._add_handler(
                    HandlerSpec(
                        topic=topic,
                        event_type=pattern,
                        func=handle,
                        name=getattr(func, "__qualname__", repr(func)),
                    )
                )
            return func

        return decorator

    def owns(self, plan: PlanContext) -> bool:
        """Whether ``plan`` was started by one of this planner's goals.

        Plans of every planner of a tenant live in one memory service, and answers
        find their plan by correlation id, so an unfiltered ``on_transition`` hears
        the answers of other planners' plans too. Those are skipped: only the planner
        whose ``on_goal`` matches the plan's goal event steps it. A planner without
        ``on_goal`` handlers (plans created elsewhere) takes every plan.
        """
        if not self._goal_patterns:
            return True
        return any(fnmatchcase(plan.goal_event, p) for p in self._goal_patterns)

    async def _cancel_requested(self, event: Event, context: PlatformContext) -> None:
        """Cancel the requested plan when it is one of ours.

        The plan is read as the request's tenant (the handled event's identity), so a
        request from another tenant finds no plan and changes nothing.
        """
        plan_id = event.data.get("plan_id") or event.plan_id
        if not isinstance(plan_id, str) or not plan_id:
            return
        plan = await PlanContext.restore(plan_id, context)
        if plan is None or not self.owns(plan):
            return
        reason = str(event.data.get("reason") or "cancelled")
        await plan.cancel(reason, by=event.user_id or event.tenant_id)
        self.plan_cache.put(plan.to_record())

    # -- the declarative driver ------------------------------------------------------

    async def run_state_machine(
        self,
        goal: GoalContext,
        state_machine: Mapping[str, StateConfig | Mapping[str, Any]],
        context: PlatformContext | None = None,
        *,
        initial_state: str = START_STATE,
    ) -> PlanContext:
        """Create the goal's plan and start it (idempotent for a redelivered goal).

        Returns:
            The plan, after its first action was published (or finalized, when the
            machine goes straight to a terminal state).
        """
        context = context or self.context
        plan = await goal.open_plan(
            context,
            state_machine,
            initial_state=initial_state,
            start=True,
            cache=self.plan_cache,
        )
        if plan.status == PlanStatus.PENDING:
            # Delivered before, and the plan was stored without its first step.
            await plan.execute_next()
        elif plan.is_finished():
            await plan.announce_end_again()
            return plan
        await self._finish_if_terminal(plan)
        return plan

    async def advance(self, transition: TransitionContext) -> str | None:
        """Apply one event to its plan: record the result, move, act or finish.

        Returns:
            The state entered, or ``None``.
        """
        plan = transition.plan
        # A terminal state ends the plan in the same write and request as the move.
        entered = await plan.execute_next(transition.event, finish=True)
        await self._finish_if_terminal(plan)
        return entered

    @staticmethod
    async def _finish_if_terminal(plan: PlanContext) -> None:
        if plan.at_terminal_state() and not plan.is_finished():
            final = {k: v for k, v in plan.results.items() if k not in ("final",)}
            await plan.finalize(final)


__all__ = ["GoalContext", "Planner", "TransitionContext"]
