"""ChoreographyPlanner: a Planner whose next step is chosen by an LLM (seed 002, seed 003).

The model never acts directly. For each decision the planner

1. reads the live events, their JSON Schemas and responders from the registry,
2. asks the model (through litellm) for a :class:`~soorma_common.decisions.PlannerDecision`,
3. checks every event the answer names exists (and, for a publish, is consumed by a live
   agent) and every payload matches the event's registered schema,
4. on an invalid answer re-prompts with the errors (``repair_retries`` times), then tries
   each of ``fallback_models``, then the deterministic ``fallback_planner``, and otherwise
   fails the plan with the reason,

and records every LLM call (prompt, raw output, model, latency, tokens, validation result,
attempt kind) with the plan, secrets redacted. A circuit breaker stored *in the plan* (so it
survives restarts and is shared by replicas) fails a plan after ``max_actions`` actions.

Example::

    planner = ChoreographyPlanner(name="research-advisor", reasoning_model="gpt-4o")

    @planner.on_goal("research.goal")
    async def on_goal(goal, context):
        plan = await planner.create_plan(goal, context)
        await planner.step(plan, context, trigger=f"new goal: {goal.data}")

    @planner.on_transition()
    async def on_transition(transition, context):
        await planner.step(transition.plan, context,
                           trigger=f"{transition.event.type}: {transition.event.data}")
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from soorma.agents.base import Agent
from soorma.agents.planner import Planner
from soorma.ai import _steps
from soorma.ai._audit import (
    ATTEMPT_FALLBACK_MODEL,
    ATTEMPT_FALLBACK_PLANNER,
    ATTEMPT_FIRST,
    ATTEMPT_REPAIR,
    AUDIT_KEY,
    DEFAULT_AUDIT_LIMIT,
    append_audit,
    audit_record,
)
from soorma.ai._catalog import EventCatalog, load_catalog, without_consumer
from soorma.ai._errors import (
    CircuitBreakerOpen,
    DecisionInvalid,
    LLMNotConfigured,
    PlannerError,
)
from soorma.ai._llm import complete, load_litellm
from soorma.ai._models import ModelEntry, model_settings
from soorma.ai._prompt import STRATEGIES, build_messages, repair_messages, response_format
from soorma.ai._validation import parse_decision, validate_decision
from soorma_common.decisions import (
    CompleteAction,
    DelegateAction,
    PlannerAction,
    PlannerDecision,
    PublishAction,
    WaitAction,
)
from soorma_common.events import ACTION_REQUESTS, ACTION_RESULTS, SYSTEM_EVENTS, EventEnvelope

logger = logging.getLogger("soorma.choreography")

DEFAULT_REASONING_MODEL = "gpt-4o"
DEFAULT_TEMPERATURE = 0.7
DEFAULT_MAX_ACTIONS = 20
DEFAULT_REPAIR_RETRIES = 1

# Keys the planner keeps in ``plan.state`` (persisted with the plan).
ACTIONS_KEY = "choreography_actions"
PENDING_KEY = "choreography_pending"
OWNER_KEY = "choreography_planner"
WAITING_KEY = "_waiting_for"
WAIT_TIMEOUT_KEY = "_wait_timeout"
RESUMED_BY_KEY = "_resumed_by"
WAITING_FOR_INPUT = "plan.waiting_for_input"
WAIT_TIMEOUT = "plan.wait_timeout"

CHOREOGRAPHY_STATE = "choreography"
_FINISHED = {"completed", "failed", "cancelled"}
_PLAN_NAMESPACE = uuid.UUID("0b7a3e52-3f0d-4f55-a6d2-64c1d3a0f0c7")


@dataclass(slots=True)
class DecisionRequest:
    """What a deterministic ``fallback_planner`` gets when the models failed.

    Attributes:
        trigger: What prompted the decision.
        plan: The plan (``None`` when reasoning without one).
        plan_id: The plan's id (or the id the decision is made for).
        current_state: The plan's current state.
        events: The actionable events (name -> registered definition).
        responses: For each actionable event, the events answering it.
        results: The plan's results so far.
        custom_context: The caller's runtime context.
        errors: Why the model attempts failed, oldest first.
    """

    trigger: str
    plan: Any
    plan_id: str
    current_state: str
    events: dict[str, Any]
    responses: dict[str, list[str]]
    results: dict[str, Any]
    custom_context: dict[str, Any] | None
    errors: list[str] = field(default_factory=list)


FallbackResult = PlannerDecision | PlannerAction | Mapping[str, Any] | None
FallbackPlanner = Callable[[DecisionRequest], FallbackResult | Awaitable[FallbackResult]]
TransitionHandler = Callable[[Any, Any], Awaitable[None]]
T = TypeVar("T", bound=TransitionHandler)


def _status(plan: Any) -> str:
    return str(getattr(plan, "status", "") or "")


def _value(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


class ChoreographyPlanner(Planner):
    """A Planner that lets an LLM choose the next event (seed 002 RF-SDK-016).

    Args:
        name: Planner (agent) name.
        reasoning_model: litellm model id (``"gpt-4o"``, ``"anthropic/claude-..."``,
            ``"ollama/llama3"``, ``"azure/<deployment>"``). The provider key comes from
            its usual environment variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` ...)
            unless ``api_key`` is given.
        api_key: Provider key override (never recorded: audit records are redacted).
        api_base: Custom endpoint (Azure, a proxy, a local server).
        temperature: Sampling temperature.
        max_actions: Circuit breaker: the most actions one plan may take; the next
            decision fails the plan. Counted in the plan, so it holds across restarts.
        system_instructions: Business rules for the model (compliance, domain rules).
        planning_strategy: ``"balanced"``, ``"conservative"`` or ``"aggressive"``.
        repair_retries: Re-prompts with the validation errors before moving on to the
            next model.
        fallback_models: Models tried in order once the main model's repairs failed:
            litellm model ids (sharing ``api_base``/``api_key``), or per-model settings
            ``{"model", "api_base", "api_key_env"}`` / litellm Router ``model_list``
            entries (``{"model_name", "litellm_params": {"model", "api_base",
            "api_key": "os.environ/VAR"}}``), so a local model can fall back to a
            hosted one (see :mod:`soorma.ai._models`).
        fallback_planner: Deterministic ``(DecisionRequest) -> decision | action |
            dict | None`` (sync or async) used when every model failed; its answer is
            validated too.
        audit_limit: How many audit records a plan keeps (the newest).
        description: Registry description.
        **llm_kwargs: Passed to ``litellm.acompletion`` (``max_tokens``, ``top_p``,
            ``mock_response`` ...) and, when they are Agent/Planner options
            (``context``, ``capabilities``, ``max_concurrency`` ...), to the Planner.
    """

    agent_type = "planner"

    def __init__(
        self,
        *,
        name: str,
        reasoning_model: str = DEFAULT_REASONING_MODEL,
        api_key: str | None = None,
        api_base: str | None = None,
        temperature: float = DEFAULT_TEMPERATURE,
        max_actions: int = DEFAULT_MAX_ACTIONS,
        system_instructions: str | None = None,
        planning_strategy: str = "balanced",
        repair_retries: int = DEFAULT_REPAIR_RETRIES,
        fallback_models: Sequence[ModelEntry] = (),
        fallback_planner: FallbackPlanner | None = None,
        audit_limit: int = DEFAULT_AUDIT_LIMIT,
        description: str | None = None,
        **llm_kwargs: Any,
    ) -> None:
        if planning_strategy not in STRATEGIES:
            raise ValueError(
                f"planning_strategy must be one of {sorted(STRATEGIES)}, got {planning_strategy!r}"
            )
        if max_actions < 1:
            raise ValueError("max_actions must be at least 1")
        if repair_retries < 0:
            raise ValueError("repair_retries must be 0 or more")
        if not reasoning_model:
            raise ValueError("reasoning_model must name a litellm model, e.g. 'gpt-4o'")
        if fallback_planner is not None and not callable(fallback_planner):
            raise TypeError("fallback_planner must be a callable (DecisionRequest) -> decision")
        agent_options = {
            key: llm_kwargs.pop(key) for key in list(llm_kwargs) if key in _AGENT_OPTIONS
        }
        super().__init__(
            name=name,
            description=description or f"Autonomous planner using {reasoning_model}",
            **agent_options,
        )
        # WAIT pauses plans; the tracker's plan.wait_timeout resumes them (contract C2).
        self.listens_for_wait_timeout = True
        self.reasoning_model = reasoning_model
        self.api_key = api_key
        self.api_base = api_base
        self.temperature = temperature
        self.max_actions = max_actions
        self.system_instructions = system_instructions
        self.planning_strategy = planning_strategy
        self.repair_retries = repair_retries
        # Main model first, then the fallbacks, each with its own endpoint and key.
        self.models = (
            model_settings(reasoning_model, api_base=api_base, api_key=api_key),
            *(model_settings(m, api_base=api_base, api_key=api_key) for m in fallback_models),
        )
        self.fallback_models = tuple(m.model for m in self.models[1:])
        self.fallback_planner = fallback_planner
        self.audit_limit = audit_limit
        self.llm_kwargs = llm_kwargs
        # Audit of calls made without a plan (and a recent copy of all), in process only.
        self.audit_log: deque[dict[str, Any]] = deque(maxlen=max(audit_limit, 1))

    async def start(self) -> None:
        """Load litellm (in a thread, off the event loop), then start as any agent.

        litellm takes seconds to import; loading it here rather than at the first
        decision means the planner registers and reports ready only once it can
        decide, and its first goal is not kept waiting.
        """
        if not self.running:
            started = time.perf_counter()
            await asyncio.to_thread(load_litellm)
            logger.info(
                "planner %s: litellm loaded in %.1f s", self.name, time.perf_counter() - started
            )
        await super().start()

    def check_llm_configured(self) -> None:
        """Fail fast when no model can be called, naming the variable to set.

        Call it at start-up so a missing key stops the process with a clear message
        instead of failing the first plan. Does not import litellm or call the model.

        Raises:
            LLMNotConfigured: neither ``reasoning_model`` nor any of ``fallback_models``
                has its provider key (the message names the reasoning model's
                environment variable, e.g. ``OPENAI_API_KEY``).
        """
        first: LLMNotConfigured | None = None
        for spec in self.models:
            try:
                spec.check_configured(self.llm_kwargs)
            except LLMNotConfigured as exc:
                first = first or exc
            else:
                return
        if first is not None:
            raise first

    # -- reasoning -------------------------------------------------------------------

    async def reason_next_action(
        self,
        trigger: str,
        context: Any,
        plan_id: str | None = None,
        custom_context: Mapping[str, Any] | None = None,
        *,
        plan: Any = None,
        llm_options: Mapping[str, Any] | None = None,
    ) -> PlannerDecision:
        """Ask the model for the plan's next action and validate it.

        Args:
            trigger: What happened (e.g. ``"search.completed: {...}"``).
            context: The handler's PlatformContext (``registry``/``toolkit`` for events,
                ``memory`` for the plan).
            plan_id: Plan to decide for; restored from memory when ``plan`` is omitted.
            custom_context: Runtime facts for this decision (customer tier, limits ...).
            plan: The plan object itself (saves a read when the caller has it).
            llm_options: Extra ``litellm.acompletion`` options for this call only
                (e.g. a scripted ``mock_response``).

        Returns:
            A validated decision (events exist, payloads match their schemas).

        Raises:
            CircuitBreakerOpen: the plan already took ``max_actions`` actions (the plan
                is failed).
            LLMNotConfigured: litellm is missing or the provider key is unset (names the
                environment variable to set).
            DecisionInvalid: no valid decision from any model or the fallback planner
                (the plan is failed with the reason).
        """
        if plan is None and plan_id is not None:
            plan = await self._restore(plan_id, context)
        if plan is not None:
            await self._check_breaker(plan)
        the_plan_id = plan.plan_id if plan is not None else (plan_id or "")
        current_state = (getattr(plan, "current_state", None) if plan is not None else None) or ""
        # Its own goals are not offered: the planner must not send itself its goal.
        catalog = without_consumer(await load_catalog(context), self.name, self._goal_events)
        messages = build_messages(
            trigger=trigger,
            catalog=catalog,
            strategy=self.planning_strategy,
            system_instructions=self.system_instructions,
            plan_summary=self._plan_summary(plan),
            custom_context=custom_context,
        )
        options = {**self.llm_kwargs, **(llm_options or {})}
        records: list[dict[str, Any]] = []
        failures: list[str] = []
        config_errors: list[LLMNotConfigured] = []

        for index, spec in enumerate(self.models):
            model = spec.model
            attempt_messages = messages
            for repair in range(self.repair_retries + 1):
                kind = (
                    ATTEMPT_REPAIR
                    if repair
                    else (ATTEMPT_FIRST if index == 0 else ATTEMPT_FALLBACK_MODEL)
                )
                try:
                    answer = await complete(
                        model=model,
                        messages=attempt_messages,
                        response_format=response_format(),
                        api_key=spec.key(),
                        api_base=spec.api_base,
                        temperature=self.temperature,
                        options={**options, **spec.options},
                    )
                except LLMNotConfigured as exc:
                    config_errors.append(exc)
                    failures.append(f"{model}: {exc.message}")
                    records.append(
                        self._record(kind, model, attempt_messages, None, None, None, [exc.message])
                    )
                    break
                except Exception as exc:  # provider/network errors: try the next model
                    error = f"{type(exc).__name__}: {exc}"
                    failures.append(f"{model}: {error}")
                    records.append(
                        self._record(kind, model, attempt_messages, None, None, None, [error])
                    )
                    break
                decision, errors = parse_decision(
                    answer.content, plan_id=the_plan_id, current_state=current_state
                )
                if decision is not None:
                    decision, errors = validate_decision(decision, catalog)
                records.append(
                    self._record(
                        kind,
                        model,
                        attempt_messages,
                        answer.content,
                        answer.latency_ms,
                        answer.tokens,
                        errors,
                    )
                )
                if decision is not None and not errors:
                    await self._keep_audit(plan, records)
                    return decision
                failures.append(f"{model} ({kind}): " + "; ".join(errors))
                attempt_messages = repair_messages(attempt_messages, answer.content, errors)

        decision = await self._fallback(
            trigger, plan, the_plan_id, current_state, catalog, custom_context, failures, records
        )
        if decision is not None:
            await self._keep_audit(plan, records)
            return decision
        if config_errors and len(config_errors) == len(failures):
            # Nothing was even attempted: the fix is configuration, say so plainly.
            await self._keep_audit(plan, records)
            raise config_errors[0]
        reason = (f"no valid decision after {len(records)} attempt(s): " + " | ".join(failures))[
            :2000
        ]
        await self._keep_audit(plan, records)
        if plan is not None:
            await plan.fail(reason)
        raise DecisionInvalid(reason, details={"attempts": failures, "plan_id": the_plan_id})

    async def _fallback(
        self,
        trigger: str,
        plan: Any,
        plan_id: str,
        current_state: str,
        catalog: EventCatalog,
        custom_context: Mapping[str, Any] | None,
        failures: list[str],
        records: list[dict[str, Any]],
    ) -> PlannerDecision | None:
        if self.fallback_planner is None:
            return None
        request = DecisionRequest(
            trigger=trigger,
            plan=plan,
            plan_id=plan_id,
            current_state=current_state,
            events=dict(catalog.actionable),
            responses=dict(catalog.responses),
            results=self._results(plan),
            custom_context=dict(custom_context or {}) or None,
            errors=list(failures),
        )
        try:
            produced = self.fallback_planner(request)
            if inspect.isawaitable(produced):
                produced = await produced
        except Exception as exc:
            error = f"fallback planner raised {type(exc).__name__}: {exc}"
            failures.append(error)
            records.append(
                self._record(ATTEMPT_FALLBACK_PLANNER, None, None, None, None, None, [error])
            )
            return None
        if produced is None:
            failures.append("fallback planner had no decision")
            records.append(
                self._record(
                    ATTEMPT_FALLBACK_PLANNER, None, None, None, None, None, ["no decision"]
                )
            )
            return None
        decision, errors = _as_decision(produced, plan_id, current_state)
        if decision is not None:
            decision, errors = validate_decision(decision, catalog)
        raw = decision.model_dump_json() if decision is not None else repr(produced)
        records.append(self._record(ATTEMPT_FALLBACK_PLANNER, None, None, raw, None, None, errors))
        if errors:
            failures.append("fallback planner: " + "; ".join(errors))
            return None
        return decision

    # -- execution -------------------------------------------------------------------

    async def execute_decision(
        self,
        decision: PlannerDecision,
        context: Any,
        goal_event: Any = None,
        plan: Any = None,
        *,
        step_key: str | None = None,
    ) -> str | None:
        """Carry out a decision.

        - PUBLISH: ``bus.request`` (or ``publish`` off ``action-requests``) with the
          decision's ``response_event`` and a fresh correlation id registered with the
          plan, so the answer comes back as a transition of this plan.
        - COMPLETE: ``plan.finalize(result)`` (replies on the goal's ``response_event``);
          without a plan, replies to ``goal_event`` directly.
        - WAIT: pauses the plan, records ``_waiting_for`` in its state and announces
          ``plan.waiting_for_input`` on ``system-events``; the expected event resumes it.
        - DELEGATE: sends ``goal_event`` to the target planner with a correlation id and
          ``response_event``; its final answer returns as a transition of this plan.

        Every action counts towards the plan's circuit breaker.

        Args:
            decision: A decision from :meth:`reason_next_action` (or built by hand).
            context: The handler's PlatformContext.
            goal_event: The goal (GoalContext or event) to answer when there is no plan.
            plan: The plan the decision belongs to (required for WAIT).
            step_key: The step this decision is for (normally the triggering event's
                id, as :meth:`step` passes it). With a plan, the decision and the
                events it sends are recorded under it before anything is published,
                and the ids it sends derive from it (see :meth:`step`).

        Returns:
            The correlation id of a published/delegated request, else ``None``.

        Raises:
            CircuitBreakerOpen: the plan already took ``max_actions`` actions.
            PlannerError: WAIT without a plan, COMPLETE with nothing to answer.
        """
        action = decision.next_action
        if plan is None:
            step_key = None
        else:
            await self._check_breaker(plan)
        if isinstance(action, PublishAction | DelegateAction):
            return await self._send_request(action, context, plan, decision, step_key)
        if plan is not None:
            taken: list[dict[str, Any]] = []

            def count(p: Any) -> None:
                taken[:] = [s for s in [_steps.recorded_step(p, step_key)] if s is not None]
                if taken:
                    return  # another handler of the same trigger recorded it first
                _count_action(p)
                if step_key is not None:
                    _steps.record_step(p, step_key, decision, [])

            await plan.update(count)
            if taken:
                await self._replay(taken[0], context, plan, step_key)
                return None
        if isinstance(action, CompleteAction):
            await self._complete(action, context, goal_event, plan)
        elif isinstance(action, WaitAction):
            await self._wait(action, context, plan, step_key)
        return None

    async def _send_request(
        self,
        action: PublishAction | DelegateAction,
        context: Any,
        plan: Any,
        decision: PlannerDecision | None = None,
        step_key: str | None = None,
    ) -> str:
        if isinstance(action, PublishAction):
            event_type, data, topic = action.event_type, action.data, action.topic
        else:
            event_type, data, topic = action.goal_event, action.goal_data, ACTION_REQUESTS
        if not action.response_event:
            raise PlannerError(
                f"{event_type!r} has no response_event: validate the decision with "
                "reason_next_action() or set response_event"
            )
        keyed = plan is not None and step_key is not None
        correlation_id = (
            _steps.derived_id(plan.plan_id, str(step_key), "request")
            if keyed
            else str(uuid.uuid4())
        )
        extra: dict[str, Any] = {}
        if plan is not None:
            extra = {"plan_id": plan.plan_id, "session_id": getattr(plan, "session_id", None)}
        bus = context.bus
        envelope = bus.inherit(
            bus.build_event(
                topic,
                event_type,
                data,
                correlation_id=correlation_id,
                response_event=action.response_event,
                response_topic=ACTION_RESULTS if topic == ACTION_REQUESTS else None,
                # A keyed step's request is its own id: sent again, it is the same event.
                event_id=correlation_id if keyed else None,
                **extra,
            )
        )
        if plan is not None:
            request = {
                "event_type": event_type,
                "response_event": action.response_event,
                "kind": action.action.value,
            }
            sent = [envelope.model_dump(mode="json", exclude_none=True)]
            taken: list[dict[str, Any]] = []

            def register(p: Any) -> None:
                taken[:] = [s for s in [_steps.recorded_step(p, step_key)] if s is not None]
                if taken:
                    return  # another handler of the same trigger recorded it first
                _count_action(p)
                _add_correlation(p, correlation_id)
                p.state[PENDING_KEY] = {**(p.state.get(PENDING_KEY) or {}), correlation_id: request}
                if step_key is not None and decision is not None:
                    _steps.record_step(p, step_key, decision, sent)

            # Registered and stored BEFORE publishing: a fast answer must find its plan,
            # and a redelivered trigger finds the step instead of deciding again.
            # update() re-runs the change after a conflicting write, so concurrent
            # handlers never lose a count or a pending request.
            await plan.update(register)
            if taken:
                await self._replay(taken[0], context, plan, step_key)
                return correlation_id
        await bus.publish_event(envelope)
        return correlation_id

    async def _replay(
        self, step: dict[str, Any], context: Any, plan: Any, step_key: str | None
    ) -> None:
        """Carry out a recorded step again without deciding: re-send its requests that
        are still unanswered (same event ids), end or pause the plan as it decided."""
        decision = _steps.recorded_decision(step)
        action = decision.next_action
        if isinstance(action, PublishAction | DelegateAction):
            pending = plan.state.get(PENDING_KEY) or {}
            again = [e for e in step.get("events") or [] if e.get("correlation_id") in pending]
            if _status(plan) not in _FINISHED:
                for raw in again:
                    await context.bus.publish_event(EventEnvelope.model_validate(raw))
        elif isinstance(action, CompleteAction):
            if _status(plan) in _FINISHED:
                await plan.announce_end_again()
            else:
                await plan.finalize(action.result)
        elif isinstance(action, WaitAction) and _status(plan) == "paused":
            await self._wait(action, context, plan, step_key)

    async def _complete(
        self, action: CompleteAction, context: Any, goal_event: Any, plan: Any
    ) -> None:
        if plan is not None:
            await plan.finalize(action.result)
            return
        response_event = _value(goal_event, "response_event")
        correlation_id = _value(goal_event, "correlation_id")
        if not response_event or not correlation_id:
            raise PlannerError(
                "COMPLETE needs the plan, or a goal_event with response_event and "
                "correlation_id to answer"
            )
        await context.bus.respond(
            response_event,
            action.result,
            correlation_id=correlation_id,
            topic=_value(goal_event, "response_topic") or ACTION_RESULTS,
        )

    async def _wait(
        self, action: WaitAction, context: Any, plan: Any, step_key: str | None = None
    ) -> None:
        if plan is None:
            raise PlannerError("WAIT needs the plan (execute_decision(..., plan=plan)) to pause")

        def expect(p: Any) -> None:
            p.state[WAITING_KEY] = action.expected_event
            p.state[WAIT_TIMEOUT_KEY] = action.timeout_seconds

        await plan.update(expect)
        await plan.pause(action.reason)
        # The plan id always leads back to the plan (by-correlation), whatever the goal's
        # own correlation id was: whoever answers the wait must use it.
        correlation_id = plan.plan_id
        await context.bus.publish(
            SYSTEM_EVENTS,
            WAITING_FOR_INPUT,
            {
                "plan_id": plan.plan_id,
                "correlation_id": correlation_id,
                "reason": action.reason,
                "expected_event": action.expected_event,
                "timeout_seconds": action.timeout_seconds,
            },
            correlation_id=correlation_id,
            plan_id=plan.plan_id,
            event_id=_steps.derived_id(plan.plan_id, step_key, "wait") if step_key else None,
        )

    # -- transitions -----------------------------------------------------------------

    def on_transition(self, *args: Any, **kwargs: Any) -> Callable[[T], T]:
        """Register the transition handler; the planner screens events first.

        Before the handler runs: an answer to a request this planner published is
        recorded in ``plan.results[<request event type>]``; while the plan is paused by
        WAIT only the expected event gets through (it resumes the plan, its data is
        recorded under its event type), any other event leaves the plan paused and is
        dropped; events for finished plans and echoes of the planner's own requests
        are dropped.
        """
        register = super().on_transition(*args, **kwargs)

        def decorator(func: T) -> T:
            async def screened(transition: Any, context: Any) -> None:
                if await self.accept_event(transition.event, transition.plan):
                    await func(transition, context)

            screened.__name__ = getattr(func, "__name__", "on_transition")
            screened.__qualname__ = getattr(func, "__qualname__", screened.__name__)
            register(screened)
            return func

        return decorator

    async def accept_event(self, event: Any, plan: Any) -> bool:
        """Apply an incoming event to ``plan``; ``True`` when the plan should react.

        Called for you by :meth:`on_transition` handlers. Records answers, resumes a
        WAIT on its expected event and keeps a paused plan paused otherwise.
        """
        owner = plan.state.get(OWNER_KEY)
        if owner is not None and owner != self.name:
            return False  # another planner's plan (e.g. the parent of our sub-plan)
        status = _status(plan)
        if status in _FINISHED:
            if _steps.recorded_step(plan, event.id) is not None:
                # The trigger of the step that ended the plan, delivered again: its
                # first handling may have died (or lost the event service) between
                # storing the end and announcing it. step() re-announces it.
                return True
            logger.debug("plan %s is %s; ignoring %s", plan.plan_id, status, event.type)
            return False
        pending: dict[str, Any] = plan.state.get(PENDING_KEY) or {}
        request = pending.get(event.correlation_id or "")
        if request is not None and event.type == request["event_type"]:
            return False  # our own request, seen on a topic the planner listens to
        if request is None:
            answer_id = _steps.answered_by(plan, event.correlation_id)
            if answer_id is not None and answer_id != event.id:
                logger.info(
                    "plan %s: a second answer to %s (%s) is dropped",
                    plan.plan_id,
                    event.correlation_id,
                    event.type,
                )
                return False
        if event.type == WAIT_TIMEOUT and not (
            _wait_timeout_for(event, plan) or plan.state.get(RESUMED_BY_KEY) == event.id
        ):
            return False  # another plan's, or late: the wait already ended
        if status == "paused":
            expected = plan.state.get(WAITING_KEY)
            if event.type != expected and event.type != WAIT_TIMEOUT:
                logger.info(
                    "plan %s waits for %s; %s leaves it paused",
                    plan.plan_id,
                    expected,
                    event.type,
                )
                return False

            def arrived(p: Any) -> None:
                p.state.pop(WAITING_KEY, None)
                p.state.pop(WAIT_TIMEOUT_KEY, None)
                p.state[RESUMED_BY_KEY] = event.id
                p.results[event.type] = event.data

            await plan.update(arrived)
            await plan.resume(event.data)
            return True
        if request is not None and event.type == request["response_event"]:

            def answered(p: Any) -> None:
                still = dict(p.state.get(PENDING_KEY) or {})
                still.pop(event.correlation_id, None)
                p.state[PENDING_KEY] = still
                p.results[request["event_type"]] = event.data
                _steps.note_answer(p, str(event.correlation_id), event.id)

            await plan.update(answered)
        return True

    # -- convenience -----------------------------------------------------------------

    async def create_plan(
        self,
        goal: Any,
        context: Any,
        *,
        plan_id: str | None = None,
        parent_plan_id: str | None = None,
    ) -> Any:
        """Create (or, for a redelivered goal, restore) the plan for ``goal``.

        A choreography plan has a single open state: the model, not a state machine,
        decides each step. The plan id is derived from the goal event's id, so a
        redelivered goal finds its plan instead of starting a second one.

        Args:
            goal: The goal (a GoalContext or the goal event).
            context: The handler's PlatformContext.
            plan_id: Explicit plan id.
            parent_plan_id: The delegating plan, for a sub-plan.
        """
        from soorma.plan_context import PlanContext
        from soorma_common.errors import VersionConflict
        from soorma_common.state import StateConfig

        event = _value(goal, "event") or goal
        event_id = _value(event, "id")
        if plan_id is None:
            plan_id = (
                str(uuid.uuid5(_PLAN_NAMESPACE, f"{self.name}/{event_id}"))
                if event_id
                else str(uuid.uuid4())
            )
        try:
            plan = await PlanContext.create(
                context,
                goal_event=_value(goal, "event_type") or _value(event, "type") or "",
                goal_data=_value(goal, "data") or {},
                state_machine={
                    CHOREOGRAPHY_STATE: StateConfig(
                        state_name=CHOREOGRAPHY_STATE,
                        description="next steps are chosen by the LLM",
                    )
                },
                initial_state=CHOREOGRAPHY_STATE,
                response_event=_value(goal, "response_event"),
                response_topic=_value(goal, "response_topic") or ACTION_RESULTS,
                correlation_id=_value(goal, "correlation_id"),
                plan_id=plan_id,
                parent_plan_id=parent_plan_id or _value(goal, "parent_plan_id"),
                session_id=_value(goal, "session_id"),
                state={OWNER_KEY: self.name},
                tenant_id=_value(goal, "tenant_id"),
                user_id=_value(goal, "user_id"),
            )
        except VersionConflict:
            existing = await PlanContext.restore(plan_id, context)
            if existing is None:
                raise
            plan = existing
        # The tracker reads the plan's planner (the event's source) and goal from it.
        await plan.announce_start()
        return plan

    async def step(
        self,
        plan: Any,
        context: Any,
        *,
        trigger: str,
        custom_context: Mapping[str, Any] | None = None,
        goal_event: Any = None,
        llm_options: Mapping[str, Any] | None = None,
        trigger_id: str | None = None,
    ) -> PlannerDecision | None:
        """Reason and execute one decision for ``plan``: one step per triggering event.

        The step is keyed by the event being handled (``trigger_id`` overrides it;
        outside a handler, without one, steps are not keyed). The decision and the
        requests it sends are recorded in the plan before anything is published, and
        the requests' event and correlation ids derive from the key. When the same
        trigger is delivered again (the first handling died before its ack), the
        recorded step is carried out again instead: unanswered requests are re-sent
        under the same event ids, a COMPLETE re-announces the answer, and the model
        is not asked. A plan that has ended takes no step.

        Planner errors do not escape: the plan has already been failed with the reason
        (which reaches the goal's caller), so re-delivering the event would not help.

        Returns:
            The executed decision (the recorded one for a repeated trigger), or
            ``None`` when the plan failed instead or had already ended.
        """
        key = _steps.step_key(trigger_id)
        recorded = _steps.recorded_step(plan, key)
        if recorded is not None:
            await self._replay(recorded, context, plan, key)
            return _steps.recorded_decision(recorded)
        if _status(plan) in _FINISHED:
            return None
        try:
            decision = await self.reason_next_action(
                trigger,
                context,
                plan=plan,
                custom_context=custom_context,
                llm_options=llm_options,
            )
            await self.execute_decision(
                decision, context, goal_event=goal_event, plan=plan, step_key=key
            )
        except LLMNotConfigured as exc:
            logger.error("planner %s: %s", self.name, exc.message)
            await plan.fail(exc.message)
            return None
        except PlannerError as exc:
            logger.warning("planner %s: plan %s failed: %s", self.name, plan.plan_id, exc)
            # Most planner errors failed the plan already (fail() is then a no-op); the
            # others (e.g. no registry to read events from) must not leave it running
            # with nobody left to move it on.
            await plan.fail(exc.message)
            return None
        return decision

    # -- plumbing --------------------------------------------------------------------

    async def _check_breaker(self, plan: Any) -> None:
        taken = int(plan.state.get(ACTIONS_KEY, 0))
        if taken >= self.max_actions:
            reason = (
                f"circuit breaker: plan {plan.plan_id} took {taken} actions, the limit is "
                f"max_actions={self.max_actions}"
            )
            if _status(plan) not in _FINISHED:
                await plan.fail(reason)
            raise CircuitBreakerOpen(reason, details={"plan_id": plan.plan_id, "actions": taken})

    async def _restore(self, plan_id: str, context: Any) -> Any:
        from soorma.plan_context import PlanContext

        return await PlanContext.restore(plan_id, context)

    def _record(
        self,
        kind: str,
        model: str | None,
        messages: list[dict[str, str]] | None,
        raw: str | None,
        latency_ms: float | None,
        tokens: dict[str, int] | None,
        errors: list[str],
    ) -> dict[str, Any]:
        secrets = [s for s in (self.api_key, *(m.key() for m in self.models)) if s]
        record = audit_record(
            attempt=kind,
            model=model,
            messages=messages,
            raw_output=raw,
            latency_ms=latency_ms,
            tokens=tokens,
            errors=errors,
            secrets=secrets,
        )
        self.audit_log.append(record)
        return record

    async def _keep_audit(self, plan: Any, records: list[dict[str, Any]]) -> None:
        if plan is None or not records:
            return
        await plan.update(lambda p: append_audit(p.state, records, self.audit_limit))

    @staticmethod
    def _results(plan: Any) -> dict[str, Any]:
        return dict(getattr(plan, "results", None) or {}) if plan is not None else {}

    def _plan_summary(self, plan: Any) -> dict[str, Any] | None:
        if plan is None:
            return None
        state = plan.state
        return {
            "plan_id": plan.plan_id,
            "goal_event": getattr(plan, "goal_event", None),
            "goal_data": getattr(plan, "goal_data", None),
            "status": _status(plan),
            "results": self._results(plan),
            "waiting_for_answers": sorted(
                p["response_event"] for p in (state.get(PENDING_KEY) or {}).values()
            ),
            "actions_taken": int(state.get(ACTIONS_KEY, 0)),
            "max_actions": self.max_actions,
        }


# Planner/Agent constructor options accepted among ``**llm_kwargs`` (everything else
# goes to litellm).
_AGENT_OPTIONS = frozenset(
    name
    for cls in (Planner, Agent)
    for name in inspect.signature(cls.__init__).parameters
    if name not in {"self", "kwargs", "name", "description"}
)


def _wait_timeout_for(event: Any, plan: Any) -> bool:
    """Whether a ``plan.wait_timeout`` event ends this plan's current WAIT."""
    data = event.data if isinstance(event.data, Mapping) else {}
    if (data.get("plan_id") or event.plan_id or event.correlation_id) != plan.plan_id:
        return False
    expected = data.get("expected_event")
    return _status(plan) == "paused" and (
        expected is None or expected == plan.state.get(WAITING_KEY)
    )


def _count_action(plan: Any) -> None:
    plan.state[ACTIONS_KEY] = int(plan.state.get(ACTIONS_KEY, 0)) + 1
    if _status(plan) == "pending":
        plan.status = "running"


def _add_correlation(plan: Any, correlation_id: str) -> None:
    ids = getattr(plan, "correlation_ids", None)
    if ids is None:
        plan.correlation_ids = [correlation_id]
    elif correlation_id not in ids:
        ids.append(correlation_id)


def _as_decision(
    produced: Any, plan_id: str, current_state: str
) -> tuple[PlannerDecision | None, list[str]]:
    if isinstance(produced, PlannerDecision):
        return produced.model_copy(update={"plan_id": plan_id, "current_state": current_state}), []
    if isinstance(produced, PublishAction | CompleteAction | WaitAction | DelegateAction):
        return PlannerDecision(
            plan_id=plan_id,
            current_state=current_state,
            next_action=produced,
            reasoning="deterministic fallback planner",
        ), []
    if isinstance(produced, Mapping):
        import json

        return parse_decision(
            json.dumps(dict(produced), default=str), plan_id=plan_id, current_state=current_state
        )
    return None, [f"fallback planner returned {type(produced).__name__}, not a decision"]


__all__ = [
    "ACTIONS_KEY",
    "AUDIT_KEY",
    "DEFAULT_MAX_ACTIONS",
    "DEFAULT_REASONING_MODEL",
    "WAITING_FOR_INPUT",
    "WAITING_KEY",
    "ChoreographyPlanner",
    "CircuitBreakerOpen",
    "DecisionInvalid",
    "DecisionRequest",
    "LLMNotConfigured",
    "PlannerError",
]
