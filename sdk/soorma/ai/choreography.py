"""ChoreographyPlanner: a Planner whose next step is chosen by an LLM.

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

The parts live in :mod:`soorma.ai`'s private modules: prompt building (``_prompt``),
the model calls and repairs (``_reasoning``, ``_llm``), decision validation
(``_validation``), execution (``_execution``), event screening (``_screening``) and
step recording (``_steps``). This module is the planner's public surface, over 400
lines because its methods document the decision and crash-safety contracts.

Example::

    planner = ChoreographyPlanner(name="research-advisor", reasoning_model="gpt-4o")

    @planner.on_goal("research.goal")
    async def on_goal(goal, context):
        plan = await planner.open_plan(goal, context)
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
from typing import TYPE_CHECKING, Any, TypeVar

from soorma.agents.base import Agent
from soorma.agents.planner import Planner, TransitionContext
from soorma.ai import _execution, _steps
from soorma.ai._audit import DEFAULT_AUDIT_LIMIT, audit_record
from soorma.ai._catalog import load_catalog, without_consumer
from soorma.ai._decided import Decided, DecidedSteps
from soorma.ai._errors import (
    CircuitBreakerOpen,
    DecisionInvalid,
    LLMNotConfigured,
    PlannerError,
)
from soorma.ai._execution import field_of
from soorma.ai._keys import (
    CHOREOGRAPHY_STATE,
    FINISHED,
    book,
    status,
)
from soorma.ai._llm import load_litellm
from soorma.ai._model_options import ModelOptions, check_model_options
from soorma.ai._models import ModelEntry, model_settings
from soorma.ai._prompt import STRATEGIES, build_messages
from soorma.ai._reasoning import (
    Attempts,
    CallHeaders,
    DecisionRequest,
    FallbackPlanner,
    ask_fallback,
    ask_models,
)
from soorma.ai._retrieval import Retrieval, Retrieved, retrieval_query, retrieve
from soorma.ai._screening import accept_event
from soorma.planning.plan import PlanContext
from soorma_common.bookkeeping import ChoreographyBookkeeping, PlanBookkeeping
from soorma_common.decisions import PlannerDecision
from soorma_common.errors import VersionConflict
from soorma_common.events import ACTION_RESULTS, EventEnvelope
from soorma_common.state import StateConfig

if TYPE_CHECKING:
    from soorma.context import PlatformContext

logger = logging.getLogger("soorma.choreography")

DEFAULT_REASONING_MODEL = "gpt-4o"
DEFAULT_TEMPERATURE = 0.7
DEFAULT_MAX_ACTIONS = 20
DEFAULT_REPAIR_RETRIES = 1
# The HTTP header carrying each model call's idempotency key.
DEFAULT_IDEMPOTENCY_HEADER = "Idempotency-Key"

_PLAN_NAMESPACE = uuid.UUID("0b7a3e52-3f0d-4f55-a6d2-64c1d3a0f0c7")


TransitionHandler = Callable[[TransitionContext, "PlatformContext"], Awaitable[None]]
T = TypeVar("T", bound=TransitionHandler)


class ChoreographyPlanner(Planner):
    """A Planner that lets an LLM choose the next event.

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
        idempotency_header: The HTTP header that carries each model call's idempotency
            key (default ``Idempotency-Key``); ``None`` sends none. The key derives from
            the plan, the step's trigger, the attempt (model and repair) and the prompt,
            so a trigger asked again after a crash sends the same key. A provider or LLM
            gateway that honours the key bills the repeated call once; one that
            ignores it bills it again.
        retrieval: Retrieve long-term memory before each decision (off by default):
            e.g. ``Retrieval(knowledge=5, procedures=3, episodes=5, max_chars=4000)``
            looks up knowledge, procedures and past episodes relevant to the goal and
            the trigger, adds them to the prompt in a labelled section of at most
            ``max_chars``, and records the ids it added in each audit record
            (``retrieved``). See docs/memory.md.
        description: Registry description.
        **llm_kwargs: Agent/Planner arguments (``context``, ``capabilities``,
            ``options`` ...) go to the Planner; the rest are model options passed to
            ``litellm.acompletion`` on every call: the names of
            :class:`~soorma.ai.ModelOptions` (``max_tokens``, ``top_p``,
            ``mock_response`` ...). Any other name raises ``TypeError`` naming it.
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
        idempotency_header: str | None = DEFAULT_IDEMPOTENCY_HEADER,
        retrieval: Retrieval | None = None,
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
        if retrieval is not None and not isinstance(retrieval, Retrieval):
            raise TypeError("retrieval must be a soorma.ai.Retrieval (or None)")
        if fallback_planner is not None and not callable(fallback_planner):
            raise TypeError("fallback_planner must be a callable (DecisionRequest) -> decision")
        if idempotency_header is not None and (
            not idempotency_header.strip() or any(c in idempotency_header for c in ":\r\n ")
        ):
            raise ValueError(
                "idempotency_header must be an HTTP header name such as 'Idempotency-Key' "
                f"(or None to send none), got {idempotency_header!r}"
            )
        agent_options = {
            key: llm_kwargs.pop(key) for key in list(llm_kwargs) if key in _AGENT_OPTIONS
        }
        # Fails here, naming the option, rather than at each decision as a provider error.
        llm_kwargs = check_model_options(
            llm_kwargs, f"ChoreographyPlanner(name={name!r})", arguments=_AGENT_OPTIONS
        )
        super().__init__(
            name=name,
            description=description or f"Autonomous planner using {reasoning_model}",
            **agent_options,
        )
        # WAIT pauses plans; the tracker publishes plan.wait_timeout when a WAIT outlives
        # its timeout, and that event resumes them.
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
        self.idempotency_header = idempotency_header
        self.retrieval = retrieval
        self.llm_kwargs = llm_kwargs
        # Decisions taken but not yet recorded in their plan (memory unreachable), so
        # the retried trigger does not ask the model again.
        self._decided = DecidedSteps()
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
        context: PlatformContext,
        plan_id: str | None = None,
        custom_context: Mapping[str, Any] | None = None,
        *,
        plan: PlanContext | None = None,
        llm_options: ModelOptions | Mapping[str, Any] | None = None,
        step_key: str | None = None,
    ) -> PlannerDecision:
        """Ask the model for the plan's next action and validate it.

        Args:
            trigger: What happened (e.g. ``"search.completed: {...}"``).
            context: The handler's PlatformContext (``registry``/``toolkit`` for events,
                ``memory`` for the plan).
            plan_id: Plan to decide for; restored from memory when ``plan`` is omitted.
            custom_context: Runtime facts for this decision (customer tier, limits ...).
            plan: The plan object itself (saves a read when the caller has it).
            llm_options: Extra model options for this call only (the names of
                :class:`~soorma.ai.ModelOptions`, e.g. a scripted ``mock_response``);
                another name raises ``TypeError`` naming it.
            step_key: The step this decision is for (:meth:`step` passes the triggering
                event's id). With a plan, each model call then carries an idempotency
                key derived from plan, step and attempt (see ``idempotency_header``).

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
        decision, records = await self._decide(
            trigger,
            context,
            plan_id,
            custom_context,
            plan=plan,
            llm_options=llm_options,
            step_key=step_key,
        )
        await self._keep_audit(plan, records)
        return decision

    async def _decide(
        self,
        trigger: str,
        context: PlatformContext,
        plan_id: str | None,
        custom_context: Mapping[str, Any] | None,
        *,
        plan: PlanContext | None,
        llm_options: Mapping[str, Any] | None,
        step_key: str | None,
    ) -> tuple[PlannerDecision, list[dict[str, Any]]]:
        """A valid decision and its audit records, which the caller keeps.

        When there is no valid decision the records are kept here and the plan failed.
        """
        # A bad option is the caller's mistake: refused before anything is read or asked.
        llm_options = check_model_options(llm_options or {}, "llm_options")
        if plan is None and plan_id is not None:
            plan = await PlanContext.restore(plan_id, context)
        if plan is not None:
            await self._check_breaker(plan)
        the_plan_id = plan.plan_id if plan is not None else (plan_id or "")
        current_state = (plan.current_state if plan is not None else None) or ""
        # Its own goals are not offered: the planner must not send itself its goal.
        catalog = without_consumer(await load_catalog(context), self.name, self._goal_events)
        retrieved = await self._retrieve(trigger, context, plan)
        messages = build_messages(
            trigger=trigger,
            catalog=catalog,
            strategy=self.planning_strategy,
            system_instructions=self.system_instructions,
            plan_summary=self._plan_summary(plan),
            custom_context=custom_context,
            memory_section=retrieved.section if retrieved is not None else None,
        )
        attempts = Attempts()
        decision = await ask_models(
            models=self.models,
            repair_retries=self.repair_retries,
            temperature=self.temperature,
            options={**self.llm_kwargs, **(llm_options or {})},
            messages=messages,
            catalog=catalog,
            plan_id=the_plan_id,
            current_state=current_state,
            record=self._record,
            attempts=attempts,
            call_headers=self._call_headers(the_plan_id if plan is not None else "", step_key),
        )
        if decision is None and self.fallback_planner is not None:
            request = DecisionRequest(
                trigger=trigger,
                plan=plan,
                plan_id=the_plan_id,
                current_state=current_state,
                events=dict(catalog.actionable),
                responses=dict(catalog.responses),
                results=self._results(plan),
                custom_context=dict(custom_context or {}) or None,
                errors=list(attempts.failures),
            )
            decision = await ask_fallback(
                self.fallback_planner, request, catalog, self._record, attempts
            )
        records, failures, config_errors = (
            attempts.records,
            attempts.failures,
            attempts.config_errors,
        )
        if retrieved is not None:
            for entry in records:
                entry["retrieved"] = retrieved.provenance()
        if decision is not None:
            return decision, records
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

    # -- execution -------------------------------------------------------------------

    async def execute_decision(
        self,
        decision: PlannerDecision,
        context: PlatformContext,
        goal_event: Any = None,
        plan: PlanContext | None = None,
        *,
        step_key: str | None = None,
    ) -> str | None:
        """Carry out a decision.

        - PUBLISH: ``bus.request`` (or ``publish`` off ``action-requests``) with the
          decision's ``response_event`` and a fresh correlation id registered with the
          plan, so the answer comes back as a transition of this plan.
        - COMPLETE: ``plan.finalize(result)`` (replies on the goal's ``response_event``);
          without a plan, replies to ``goal_event`` directly.
        - WAIT: pauses the plan, records what it waits for in its bookkeeping and announces
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
        if plan is not None:
            await self._check_breaker(plan)
        return await _execution.execute(decision, context, goal_event, plan, step_key)

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
            async def screened(transition: TransitionContext, context: PlatformContext) -> None:
                if await self.accept_event(transition.event, transition.plan):
                    await func(transition, context)

            screened.__name__ = getattr(func, "__name__", "on_transition")
            screened.__qualname__ = getattr(func, "__qualname__", screened.__name__)
            register(screened)
            return func

        return decorator

    async def accept_event(self, event: EventEnvelope, plan: PlanContext) -> bool:
        """Apply an incoming event to ``plan``; ``True`` when the plan should react.

        Called for you by :meth:`on_transition` handlers. Records answers, resumes a
        WAIT on its expected event and keeps a paused plan paused otherwise.
        """
        return await accept_event(event, plan, self.name)

    # -- convenience -----------------------------------------------------------------

    async def open_plan(
        self,
        goal: Any,
        context: PlatformContext,
        *,
        plan_id: str | None = None,
        parent_plan_id: str | None = None,
    ) -> PlanContext:
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
        event = field_of(goal, "event") or goal
        event_id = field_of(event, "id")
        if plan_id is None:
            plan_id = (
                str(uuid.uuid5(_PLAN_NAMESPACE, f"{self.name}/{event_id}"))
                if event_id
                else str(uuid.uuid4())
            )
        try:
            plan = await PlanContext.create(
                context,
                goal_event=field_of(goal, "event_type") or field_of(event, "type") or "",
                goal_data=field_of(goal, "data") or {},
                state_machine={
                    CHOREOGRAPHY_STATE: StateConfig(
                        state_name=CHOREOGRAPHY_STATE,
                        description="next steps are chosen by the LLM",
                    )
                },
                initial_state=CHOREOGRAPHY_STATE,
                response_event=field_of(goal, "response_event"),
                response_topic=field_of(goal, "response_topic") or ACTION_RESULTS,
                correlation_id=field_of(goal, "correlation_id"),
                plan_id=plan_id,
                parent_plan_id=parent_plan_id or field_of(goal, "parent_plan_id"),
                session_id=field_of(goal, "session_id"),
                bookkeeping=PlanBookkeeping(
                    choreography=ChoreographyBookkeeping(planner=self.name)
                ),
                tenant_id=field_of(goal, "tenant_id"),
                user_id=field_of(goal, "user_id"),
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
        plan: PlanContext,
        context: PlatformContext,
        *,
        trigger: str,
        custom_context: Mapping[str, Any] | None = None,
        goal_event: Any = None,
        llm_options: ModelOptions | Mapping[str, Any] | None = None,
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

        When the decision cannot be recorded (the memory service is unreachable), the
        handler fails and the trigger is handled again; the decision waits in this
        process meanwhile (bounded, for minutes), so the retry records it without
        asking the model again. A process killed before the step is recorded loses the
        decision: the trigger, redelivered, asks again, with the same idempotency key
        per model call (``idempotency_header``).

        Planner errors do not escape: the plan has already been failed with the reason
        (which reaches the goal's caller), so re-delivering the event would not help.

        Returns:
            The executed decision (the recorded one for a repeated trigger), or
            ``None`` when the plan failed instead or had already ended.
        """
        key = _steps.step_key(trigger_id)
        recorded = _steps.recorded_step(plan, key)
        if recorded is not None:
            self._decided.drop(plan.plan_id, key)
            await _execution.replay(recorded, context, plan, key)
            return _steps.recorded_decision(recorded)
        if status(plan) in FINISHED:
            self._decided.drop(plan.plan_id, key)
            return None
        try:
            decided = self._decided.get(plan.plan_id, key)
            if decided is None:
                decision, records = await self._decide(
                    trigger,
                    context,
                    None,
                    custom_context,
                    plan=plan,
                    llm_options=llm_options,
                    step_key=key,
                )
                decided = Decided(decision, records)
                # Kept until recorded: a memory outage from here on fails the handler,
                # and its retry must not ask the model again.
                self._decided.put(plan.plan_id, key, decided)
            else:
                decision = decided.decision
                logger.info(
                    "planner %s: plan %s: step %s decided before, recording it now",
                    self.name,
                    plan.plan_id,
                    key,
                )
            if decided.audit:
                await self._keep_audit(plan, decided.audit)
                decided.audit = []
            await self.execute_decision(
                decision, context, goal_event=goal_event, plan=plan, step_key=key
            )
            self._decided.drop(plan.plan_id, key)
        except LLMNotConfigured as exc:
            self._decided.drop(plan.plan_id, key)
            logger.error("planner %s: %s", self.name, exc.message)
            await plan.fail(exc.message)
            return None
        except PlannerError as exc:
            self._decided.drop(plan.plan_id, key)
            logger.warning("planner %s: plan %s failed: %s", self.name, plan.plan_id, exc)
            # Most planner errors failed the plan already (fail() is then a no-op); the
            # others (e.g. no registry to read events from) must not leave it running
            # with nobody left to move it on.
            await plan.fail(exc.message)
            return None
        return decision

    # -- plumbing --------------------------------------------------------------------

    async def _retrieve(
        self, trigger: str, context: PlatformContext, plan: PlanContext | None
    ) -> Retrieved | None:
        """Long-term memory for this decision, when retrieval is on (else ``None``)."""
        if self.retrieval is None:
            return None
        if context.memory is None:
            return Retrieved(error="no memory client in the context")
        query = retrieval_query(
            plan.goal_event if plan is not None else None,
            plan.goal_data if plan is not None else None,
            trigger,
        )
        return await retrieve(self.retrieval, context.memory, query=query, agent_id=self.name)

    async def _check_breaker(self, plan: PlanContext) -> None:
        await _execution.check_breaker(plan, self.max_actions)

    def _call_headers(self, plan_id: str, key: str | None) -> CallHeaders | None:
        """Headers giving each model call of the step its idempotency key, if keyed."""
        header = self.idempotency_header
        if header is None or not plan_id or not key:
            return None

        def headers(
            model_index: int, repair: int, messages: list[dict[str, str]]
        ) -> dict[str, str]:
            return {header: _steps.model_call_key(plan_id, key, model_index, repair, messages)}

        return headers

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

    async def _keep_audit(self, plan: PlanContext | None, records: list[dict[str, Any]]) -> None:
        if plan is None or not records:
            return
        limit = self.audit_limit

        def keep(p: PlanContext) -> None:
            kept = book(p).audit
            # A write whose answer was lost (memory service killed mid-request) may
            # have been stored: keeping the records again must not repeat them.
            log = [*kept, *(r for r in records if r not in kept)]
            book(p).audit = log[-limit:] if limit > 0 else []

        await plan.update(keep)

    @staticmethod
    def _results(plan: PlanContext | None) -> dict[str, Any]:
        return dict(plan.results) if plan is not None else {}

    def _plan_summary(self, plan: PlanContext | None) -> dict[str, Any] | None:
        if plan is None:
            return None
        return {
            "plan_id": plan.plan_id,
            "goal_event": plan.goal_event,
            "goal_data": plan.goal_data,
            "status": status(plan),
            "results": self._results(plan),
            "waiting_for_answers": sorted(p["response_event"] for p in book(plan).pending.values()),
            "actions_taken": book(plan).actions,
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


__all__ = [
    "DEFAULT_IDEMPOTENCY_HEADER",
    "DEFAULT_MAX_ACTIONS",
    "DEFAULT_REASONING_MODEL",
    "ChoreographyPlanner",
    "CircuitBreakerOpen",
    "DecisionInvalid",
    "DecisionRequest",
    "LLMNotConfigured",
    "PlannerError",
    "Retrieval",
]
