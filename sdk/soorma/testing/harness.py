"""PlatformHarness: the event, memory and registry services in process, for agent tests.

::

    async with PlatformHarness() as platform:
        await platform.start(tool)
        answer = await platform.call("greet.requested", {"name": "Ada"},
                                     response_event="greet.completed")
        assert answer.data["result"] == {"greeting": "Hello, Ada!"}

The services are the real ones (their routes, validation, consumer groups, plan storage)
on embedded backends: an in-memory event log and SQLite files in a temporary directory.
The SDK reaches them through an in-process ASGI transport (no ports, no network) that
streams responses, so agents consume their SSE event streams exactly as in production.

(Over 400 lines: ``PlatformHarness`` is the one object test authors use; its helpers —
start, call, wait, look-ups, scripted LLM — document themselves here, while the ASGI
transport, recorder and LLM script live in their own modules.)
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import logging
import shutil
import tempfile
from collections.abc import Generator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from soorma.agents._options import AgentOptions
from soorma.agents.base import Agent
from soorma.context import PlatformContext
from soorma.event import Event
from soorma.settings import PlatformSettings
from soorma.testing._asgi import Lifespan, StreamingASGITransport
from soorma.testing._llm import Script, ScriptedLLM
from soorma.testing._recorder import (
    DEFAULT_WAIT_TIMEOUT,
    PUBLISH_BATCH_PATH,
    PUBLISH_PATH,
    EventPredicate,
    EventRecorder,
)
from soorma.testing._services import (
    CLOCKED_EVENT_SETTINGS,
    EVENTS_HOST,
    GATEWAY_HOST,
    TRACKER_HOST,
    ServiceSpec,
    build_app,
    service_specs,
)
from soorma_common.clock import SYSTEM_CLOCK, Clock, ManualClock, SystemClock
from soorma_common.events import ACTION_REQUESTS, ACTION_RESULTS, PLAN_FAILED
from soorma_common.memory import PlanContextRecord, TaskContextRecord

logger = logging.getLogger("soorma.testing")

DEFAULT_STOP_TIMEOUT = 2.0
TEST_SOURCE = "soorma-test"

# service name -> a directory holding its database, migrated once per process: each
# harness starts from a copy (milliseconds) instead of running the migrations (seconds).
_templates: dict[str, Path] = {}


class PendingAnswer:
    """A request published by :meth:`PlatformHarness.request`; await it for the answer.

    Attributes:
        event_id: The request's event id.
        correlation_id: The correlation id the answer carries.
        response_event: The answer's event type.
    """

    def __init__(
        self,
        recorder: EventRecorder,
        *,
        event_id: str,
        correlation_id: str,
        response_event: str,
        response_topic: str,
        timeout: float,
    ) -> None:
        self._recorder = recorder
        self.event_id = event_id
        self.correlation_id = correlation_id
        self.response_event = response_event
        self.response_topic = response_topic
        self.timeout = timeout

    async def wait(self, timeout: float | None = None) -> Event:  # noqa: ASYNC109
        """The answer event (published before or after this call).

        Raises:
            TimeoutError: no answer within ``timeout`` (default: the request's).
        """
        return await self._recorder.wait_for(
            self.response_event,
            topic=self.response_topic,
            correlation_id=self.correlation_id,
            timeout=self.timeout if timeout is None else timeout,
        )

    def __await__(self) -> Generator[Any, None, Event]:
        return self.wait().__await__()


class RunningAgents:
    """What :meth:`PlatformHarness.start` returns: ``await`` it, or ``async with`` it
    to stop the agents again when the block ends."""

    def __init__(self, harness: PlatformHarness, agents: tuple[Agent, ...]) -> None:
        self._harness = harness
        self.agents = agents

    def __await__(self) -> Generator[Any, None, None]:
        return self._harness._start_agents(self.agents).__await__()

    async def __aenter__(self) -> RunningAgents:
        await self._harness._start_agents(self.agents)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._harness.stop(*self.agents)


class PlatformHarness:
    """An in-process Soorma platform for tests: ``async with PlatformHarness() as platform``.

    Args:
        tenant_id: Tenant the test's own calls act as (``None``: the service default).
        user_id: User the test's own calls act as.
        event_settings: Event-service settings overriding the harness's (e.g.
            ``{"event_backend": "redis", "redis_url": ..., "redis_prefix": ...}``).
        memory_settings: Memory-service settings overriding the harness's (e.g.
            ``{"memory_database_url": "postgresql+asyncpg://..."}``).
        registry_settings: Registry-service settings overriding the harness's.
        data_dir: Where the SQLite files go (default: a temporary directory, removed on
            exit).
        stop_timeout: Seconds an agent's in-flight handlers get when it is stopped.
        timeout: Default seconds :meth:`call`, :meth:`wait_for_event` and answers wait.
        clock: The time of the platform: the event service's in-memory log (delivery
            leases, redelivery), the memory service's claims and recorded answers, and
            every context the harness makes (agents' ack batching, lease renewals,
            claims). Pass a ``soorma_common.clock.ManualClock`` and ``advance`` it to
            let leases run out without waiting. The harness's own waits
            (``timeout``, ``stop_timeout``) stay in real time: they bound the test.
    """

    def __init__(
        self,
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
        event_settings: Mapping[str, Any] | None = None,
        memory_settings: Mapping[str, Any] | None = None,
        registry_settings: Mapping[str, Any] | None = None,
        data_dir: str | Path | None = None,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        timeout: float = DEFAULT_WAIT_TIMEOUT,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.tenant_id = tenant_id
        self.clock = clock
        self.user_id = user_id
        clocked = {} if isinstance(clock, SystemClock) else CLOCKED_EVENT_SETTINGS
        self._overrides: dict[str, Mapping[str, Any]] = {
            "events": {**clocked, **(event_settings or {})},
            "memory": dict(memory_settings or {}),
            "registry": dict(registry_settings or {}),
        }
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._own_dir: tempfile.TemporaryDirectory[str] | None = None
        self.stop_timeout = stop_timeout
        self.timeout = timeout
        self.recorder = EventRecorder(
            default_tenant=str(self._overrides["events"].get("default_tenant", "default")),
            default_user=str(self._overrides["events"].get("default_user", "anonymous")),
            diagnose=self._diagnose,
        )
        self._errors = _ErrorLog()
        self._lifespans: list[Lifespan] = []
        self._transport: StreamingASGITransport | None = None
        self._http: httpx.AsyncClient | None = None
        self._context: PlatformContext | None = None
        self._settings: PlatformSettings | None = None
        self._agents: list[Agent] = []
        self._attached: dict[int, tuple[PlatformContext, AgentOptions]] = {}
        self._llms: list[ScriptedLLM] = []

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> PlatformHarness:
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _open(self) -> None:
        logging.getLogger("soorma").addHandler(self._errors)
        if self._data_dir is None:
            self._own_dir = tempfile.TemporaryDirectory(prefix="soorma-harness-")
            self._data_dir = Path(self._own_dir.name)
        self._data_dir.mkdir(parents=True, exist_ok=True)
        specs = service_specs(self._data_dir)
        apps: dict[str, Any] = {}
        states: dict[str, Mapping[str, Any]] = {}
        with _logging_untouched():
            for spec in specs:
                overrides = self._overrides[spec.name]
                await _seed_database(spec, overrides, self._data_dir)
                apps[spec.host] = build_app(spec, overrides, clock=self.clock)
                lifespan = Lifespan(apps[spec.host], name=f"{spec.name}-service")
                self._lifespans.append(lifespan)
                states[spec.host] = await lifespan.start()
        transport = StreamingASGITransport(
            apps,
            states=states,
            on_exchange=self.recorder.record_exchange,
            watch=frozenset(
                {
                    (EVENTS_HOST, "POST", PUBLISH_PATH),
                    (EVENTS_HOST, "POST", PUBLISH_BATCH_PATH),
                }
            ),
        )
        self._transport = transport
        self._http = httpx.AsyncClient(transport=transport, timeout=30.0)
        urls = {spec.name: spec.url for spec in specs}
        self._settings = PlatformSettings(
            event_service_url=urls["events"],
            memory_url=urls["memory"],
            registry_url=urls["registry"],
            tracker_url=f"http://{TRACKER_HOST}",
            gateway_url=f"http://{GATEWAY_HOST}",
            tenant_id=self.tenant_id,
            user_id=self.user_id,
        )
        self._context = self.new_context(source=TEST_SOURCE)

    async def close(self) -> None:
        """Stop the agents, then the services; remove the temporary data."""
        try:
            for agent in reversed(list(self._agents)):
                try:
                    await self.stop(agent)
                except Exception:
                    logger.exception("harness: stopping agent %s failed", agent.name)
            for llm in self._llms:
                llm.uninstall()
            self._llms.clear()
            if self._http is not None:
                await self._http.aclose()
                self._http = None
            self._transport = None
            self._context = None
            while self._lifespans:
                await self._lifespans.pop().stop()
        finally:
            logging.getLogger("soorma").removeHandler(self._errors)
            if self._own_dir is not None:
                self._own_dir.cleanup()
                self._own_dir = None
                self._data_dir = None

    async def advance(self, seconds: float) -> None:
        """Move the harness's ``ManualClock`` ``seconds`` on, from one deadline to the
        next, letting the requests each wake-up sends (a lease renewal, a claim, an
        answer recorded in SQLite) be answered before time moves again.

        ``clock.advance(seconds)`` alone does not wait for them: a database call takes
        real time, and meanwhile the clock could run past a lease its answer renews.

        Raises:
            TypeError: the harness runs on another clock than a ``ManualClock``.
        """
        clock = self.clock
        if not isinstance(clock, ManualClock):
            raise TypeError("advance() needs PlatformHarness(clock=ManualClock())")
        if seconds < 0:
            raise ValueError("time does not go back")
        target = clock.monotonic() + seconds
        while (due := clock.next_deadline()) is not None and due <= target:
            await clock.advance(max(due - clock.monotonic(), 0.0))
            await self._quiet()
        await clock.advance(max(target - clock.monotonic(), 0.0))
        await self._quiet()

    async def _quiet(self) -> None:
        if self._transport is not None:
            await self._transport.quiet()

    @property
    def errors(self) -> list[str]:
        """Errors the SDK logged meanwhile (a handler that raised, a planner that failed),
        each with its exception; also appended to the message of a wait that timed out."""
        return list(self._errors.messages)

    def _diagnose(self) -> str:
        hints = []
        failed = [f"{e.plan_id}: {e.data.get('reason')}" for e in self.recorder.events(PLAN_FAILED)]
        if failed:
            hints.append("plans failed: " + " | ".join(failed[-3:]))
        if self._errors.messages:
            hints.append(
                "errors logged: "
                + " | ".join(m.splitlines()[0] for m in self._errors.messages[-5:])
            )
        return "; ".join(hints)

    # -- clients ---------------------------------------------------------------------

    @property
    def context(self) -> PlatformContext:
        """The test's own platform clients (bus, memory, registry), source ``soorma-test``."""
        if self._context is None:
            raise RuntimeError("the harness is not running: use `async with PlatformHarness()`")
        return self._context

    @property
    def settings(self) -> PlatformSettings:
        """Where the in-process services are (their URLs only resolve through the harness)."""
        if self._settings is None:
            raise RuntimeError("the harness is not running: use `async with PlatformHarness()`")
        return self._settings

    @property
    def http(self) -> httpx.AsyncClient:
        """The HTTP client whose transport reaches the in-process services."""
        if self._http is None:
            raise RuntimeError("the harness is not running: use `async with PlatformHarness()`")
        return self._http

    def new_context(
        self,
        *,
        source: str = TEST_SOURCE,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> PlatformContext:
        """Platform clients on the in-process services (what agents are given), on the
        harness's clock.

        Args:
            source: The ``source`` of the events its bus publishes.
            tenant_id: Act as this tenant instead of the harness's.
            user_id: Act as this user instead of the harness's.
        """
        settings = self.settings
        if tenant_id is not None or user_id is not None:
            settings = dataclasses.replace(
                settings,
                tenant_id=tenant_id or settings.tenant_id,
                user_id=user_id or settings.user_id,
            )
        context = PlatformContext.from_env(http=self.http, settings=settings)
        context.bus.source = source
        context.clock = self.clock
        return context

    # -- agents ----------------------------------------------------------------------

    def start(self, *agents: Agent) -> RunningAgents:
        """Start agents on the harness: ``await platform.start(tool, worker)``.

        Each agent without a context of its own gets one on the in-process services. It
        registers with the registry and its event stream is live when this returns.
        Agents still running when the harness closes are stopped then; ``async with
        platform.start(agent):`` stops them when the block ends.
        """
        if not agents:
            raise TypeError("start() needs at least one agent")
        return RunningAgents(self, agents)

    async def _start_agents(self, agents: tuple[Agent, ...]) -> None:
        # Started together: each registers and opens its stream independently.
        outcomes = await asyncio.gather(
            *(self._start_one(agent) for agent in dict.fromkeys(agents)),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def _start_one(self, agent: Agent) -> None:
        if agent.running:
            return
        if id(agent) not in self._attached:
            self._attached[id(agent)] = (self._attach(agent), agent.options)
        # Handlers still running at a test's end get stop_timeout, not the agent's own.
        agent._options = dataclasses.replace(
            agent.options, shutdown_timeout=min(agent.shutdown_timeout, self.stop_timeout)
        )
        try:
            await agent.start()
        except BaseException:
            self._detach(agent)
            raise
        self._agents.append(agent)

    async def stop(self, *agents: Agent) -> None:
        """Stop agents gracefully (in-flight handlers get ``stop_timeout`` seconds).

        A stopped agent can be started again (a restart keeps its consumer group).
        """
        for agent in agents:
            try:
                await agent.stop()
            finally:
                if agent in self._agents:
                    self._agents.remove(agent)
                self._detach(agent)

    def _attach(self, agent: Agent) -> PlatformContext:
        # Agents build their context from the environment at start() unless given one;
        # the harness gives them one on its services instead (unless they have their own).
        own = agent._context
        if own is not None:
            return own
        context = self.new_context(source=agent.name)
        agent._context = context
        return context

    def _detach(self, agent: Agent) -> None:
        attached = self._attached.pop(id(agent), None)
        if attached is None:
            return
        context, options = attached
        agent._options = options
        if agent._context is context and context.bus.source == agent.name:
            agent._context = None

    # -- publishing and answers ------------------------------------------------------

    async def publish(
        self, topic: str, event_type: str, data: Mapping[str, Any] | None = None, **fields: Any
    ) -> str:
        """Publish an event as the test (see :meth:`soorma.bus.BusClient.publish`)."""
        return await self.context.bus.publish(topic, event_type, data, **fields)

    async def request(
        self,
        event_type: str,
        data: Mapping[str, Any] | None = None,
        *,
        response_event: str,
        topic: str = ACTION_REQUESTS,
        response_topic: str = ACTION_RESULTS,
        correlation_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the answer's default wait
        **fields: Any,
    ) -> PendingAnswer:
        """Publish a request (or goal) now; ``await`` the result for its answer.

        Use it when the test must act between request and answer (answer a human-input
        request, restart an agent); otherwise :meth:`call` does both.

        Returns:
            A :class:`PendingAnswer`: ``answer = await pending``.
        """
        event_id = await self.context.bus.request(
            event_type,
            data,
            response_event,
            correlation_id=correlation_id,
            response_topic=response_topic,
            topic=topic,
            **fields,
        )
        return PendingAnswer(
            self.recorder,
            event_id=event_id,
            correlation_id=correlation_id or event_id,
            response_event=response_event,
            response_topic=response_topic,
            timeout=self.timeout if timeout is None else timeout,
        )

    async def call(
        self,
        event_type: str,
        data: Mapping[str, Any] | None = None,
        *,
        response_event: str,
        timeout: float | None = None,  # noqa: ASYNC109 - a test helper's deadline
        **fields: Any,
    ) -> Event:
        """Publish a request (or goal) and return its answer event.

        Args:
            event_type: The request or goal event type.
            data: Its payload.
            response_event: The event type of the answer.
            timeout: Seconds to wait (default: the harness's ``timeout``).
            **fields: Further :meth:`request` options (``topic``, ``session_id``...).

        Raises:
            TimeoutError: no answer in time (the message lists what was published).
        """
        pending = await self.request(
            event_type, data, response_event=response_event, timeout=timeout, **fields
        )
        return await pending

    # -- assertions ------------------------------------------------------------------

    def events(
        self,
        type: str | None = None,
        *,
        topic: str | None = None,
        correlation_id: str | None = None,
        plan_id: str | None = None,
        tenant_id: str | None = None,
        source: str | None = None,
        where: EventPredicate | None = None,
    ) -> list[Event]:
        """Events published so far matching every filter given, oldest first.

        ``type``, ``topic`` and ``source`` accept glob patterns (``"task.*"``).
        """
        return self.recorder.events(
            type,
            topic=topic,
            correlation_id=correlation_id,
            plan_id=plan_id,
            tenant_id=tenant_id,
            source=source,
            where=where,
        )

    async def wait_for_event(
        self,
        type: str | None = None,
        *,
        topic: str | None = None,
        correlation_id: str | None = None,
        plan_id: str | None = None,
        tenant_id: str | None = None,
        source: str | None = None,
        where: EventPredicate | None = None,
        count: int = 1,
        timeout: float | None = None,  # noqa: ASYNC109 - a test helper's deadline
    ) -> Event:
        """Wait for the ``count``-th matching event (events already published count).

        Raises:
            TimeoutError: not enough matching events in time.
        """
        return await self.recorder.wait_for(
            type,
            topic=topic,
            correlation_id=correlation_id,
            plan_id=plan_id,
            tenant_id=tenant_id,
            source=source,
            where=where,
            count=count,
            timeout=self.timeout if timeout is None else timeout,
        )

    async def plan(
        self, plan_id: str | None = None, *, correlation_id: str | None = None
    ) -> PlanContextRecord | None:
        """A plan as stored in the memory service, by id or by a correlation id.

        By correlation id: the plan that registered it (a request it sent, or the goal
        that created it), else the plan whose events answer or follow that goal.
        """
        if (plan_id is None) == (correlation_id is None):
            raise TypeError("plan() takes a plan_id or a correlation_id= (one of them)")
        memory = self.context.memory
        assert memory is not None
        if plan_id is not None:
            return await memory.get_plan_context(plan_id)
        assert correlation_id is not None
        found = await memory.get_plan_by_correlation(correlation_id)
        if found is not None:
            return found
        for candidate in self._plan_ids_for(correlation_id):
            record = await memory.get_plan_context(candidate)
            if record is not None:
                return record
        return None

    def _plan_ids_for(self, correlation_id: str) -> list[str]:
        related = self.events(correlation_id=correlation_id)
        ids = {event.id for event in related}
        followers = self.events(where=lambda e: e.parent_event_id in ids)
        return list(dict.fromkeys(e.plan_id for e in [*related, *followers] if e.plan_id))

    async def task(
        self, task_id: str | None = None, *, sub_task_id: str | None = None
    ) -> TaskContextRecord | None:
        """A worker's task context (kept while the task is open), by id or sub-task id."""
        if (task_id is None) == (sub_task_id is None):
            raise TypeError("task() takes a task_id or a sub_task_id= (one of them)")
        memory = self.context.memory
        assert memory is not None
        if task_id is not None:
            return await memory.get_task_context(task_id)
        assert sub_task_id is not None
        return await memory.get_task_by_subtask(sub_task_id)

    # -- scripted LLM ----------------------------------------------------------------

    def scripted_llm(self, script: Script) -> ScriptedLLM:
        """A scripted model for ChoreographyPlanner: pass ``llm.model`` as its
        ``reasoning_model``. Imports litellm (seconds, once per process).

        Args:
            script: Decisions in order (``PlannerDecision`` dicts or models, bare
                actions, raw text, or exceptions to raise), or a callable
                ``(LLMCall) -> decision`` (sync or async) that decides from
                ``call.plan``. An invalid answer makes the planner re-prompt: the
                re-prompt takes the next answer.
        """
        llm = ScriptedLLM(script, load_plan=self._load_plan)
        llm.install()
        self._llms.append(llm)
        return llm

    def script(self, planner: Any, script: Script) -> ScriptedLLM:
        """Point a ChoreographyPlanner at a new scripted model (its only model: the
        fallback models are dropped); returns the model."""
        from soorma.ai._models import model_settings

        llm = self.scripted_llm(script)
        planner.reasoning_model = llm.model
        planner.fallback_models = ()
        # The planner reads its models from ``models``, built from these at construction.
        planner.models = (model_settings(llm.model),)
        return llm

    async def _load_plan(self, plan_id: str) -> PlanContextRecord | None:
        if self._context is None or self._context.memory is None:
            return None
        return await self._context.memory.get_plan_context(plan_id)


class _ErrorLog(logging.Handler):
    """Keeps what the SDK logs at ERROR (a failing handler logs its traceback there)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text = f"{text}: {type(error).__name__}: {error}"
        self.messages.append(text)


@contextlib.contextmanager
def _logging_untouched() -> Generator[None, None, None]:
    """Undo the services' logging set-up (JSON on the root logger) afterwards.

    Migrations' INFO lines are held back meanwhile: every test would print them.
    """
    root, alembic = logging.getLogger(), logging.getLogger("alembic")
    handlers, level, alembic_level = list(root.handlers), root.level, alembic.level
    alembic.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        alembic.setLevel(alembic_level)


_DB_SETTING = {"memory": "memory_database_url", "registry": "registry_database_url"}


async def _seed_database(spec: ServiceSpec, overrides: Mapping[str, Any], data_dir: Path) -> None:
    """Copy the service's migrated template database into ``data_dir`` (SQLite only).

    A database already there is kept: a harness on the ``data_dir`` of an earlier one sees
    its plans and registrations, as a restarted platform would.
    """
    key = _DB_SETTING.get(spec.name)
    if key is None or key in overrides or "database_url" in overrides:
        return
    if (data_dir / f"{spec.name}.db").exists():
        return
    template = _templates.get(spec.name)
    if template is None:
        template = Path(tempfile.mkdtemp(prefix=f"soorma-harness-{spec.name}-template-"))
        atexit.register(shutil.rmtree, template, ignore_errors=True)
        template_spec = {s.name: s for s in service_specs(template)}[spec.name]
        lifespan = Lifespan(build_app(template_spec), name=f"{spec.name}-service (template)")
        await lifespan.start()
        await lifespan.stop()
        _templates[spec.name] = template
    for path in template.glob(f"{spec.name}.db*"):
        shutil.copyfile(path, data_dir / path.name)


__all__ = ["DEFAULT_STOP_TIMEOUT", "PendingAnswer", "PlatformHarness", "RunningAgents"]
