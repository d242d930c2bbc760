"""Agent: the primitive event-driven agent (layer 1).

An agent subscribes with ONE SSE stream covering all its handlers (consumer group = its
name, so replicas share the work), dispatches each event to the handlers whose topic and
event-type pattern match, acks after they return and nacks when one raises. Acks and nacks
are sent in batches (see :mod:`soorma.agents._acks`), never before the handlers finished.

Recovery: each replica has a stable consumer id (see :mod:`soorma.consumer_identity`),
so a restarted replica gets back at once what its previous life held; while a handler
runs, the agent renews the lease of its delivery every third of ``visibility_timeout``,
so a short timeout only redelivers events whose replica actually died.

This module holds the class users meet (constructor, decorators, lifecycle, per-event
dispatch). How it consumes is one :class:`~soorma.AgentOptions` value (``_options``). The
parts live beside it: registration and heartbeats (``_registration``), consumption
(``_intake``), lease renewal (``_leases``), handler matching and restart-tolerant calls
(``_dispatch``), batched acks (``_acks``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, Required, TypedDict, TypeVar

from soorma import _tracing
from soorma._propagation import handling
from soorma.agents._acks import Settlements, settlements
from soorma.agents._banner import announce
from soorma.agents._dispatch import DispatchTable, call_while_unavailable
from soorma.agents._handlers import (
    EventHandler,
    HandlerSpec,
    LifecycleHook,
    check_handler,
    check_hook,
    make_spec,
    placeholder,
)
from soorma.agents._intake import Intake
from soorma.agents._leases import LeaseRenewer
from soorma.agents._lru import RecentIds
from soorma.agents._options import AgentOptions
from soorma.agents._registration import RegistryPresence
from soorma.consumer_identity import ConsumerIdentity
from soorma.context import PlatformContext
from soorma.event import Event
from soorma.settings import PlatformSettings
from soorma.subscription import Subscription
from soorma_common import tracing as otel
from soorma_common.registry import AgentCapability, EventDefinition

if TYPE_CHECKING:
    from soorma_common.registry import AgentDefinition

logger = logging.getLogger("soorma.agent")


class AgentArguments(TypedDict, total=False):
    """:class:`Agent`'s constructor arguments, for agent types that pass them on
    (``**kwargs: Unpack[AgentArguments]``), so a type checker still checks them."""

    name: Required[str]
    description: str
    version: str
    capabilities: Sequence[AgentCapability | str]
    events_consumed: Sequence[EventDefinition | str]
    events_produced: Sequence[EventDefinition | str]
    agent_id: str | None
    context: PlatformContext | None
    options: AgentOptions | None


H = TypeVar("H", bound=EventHandler)
K = TypeVar("K", bound=LifecycleHook)


class Agent:
    """A named agent that handles events from explicit topics.

    Example::

        agent = Agent(name="order-watcher")

        @agent.on_event(topic="business-facts", event_type="order.placed")
        async def on_order(event, context):
            await context.bus.announce("order.seen", {"order_id": event.data["id"]})

        agent.run()

    Args:
        name: Agent name; also the consumer group, so replicas share events.
        description: Human description (published to the registry).
        version: Agent version.
        capabilities: Capabilities registered with the registry
            (:class:`AgentCapability`, or plain task names).
        events_consumed: Events the agent consumes: plain names, or
            :class:`EventDefinition` objects (registered with the agent).
        events_produced: Events the agent produces (same forms).
        agent_id: Registry id (default: ``name``, so replicas share one entry).
        context: Platform clients; built with ``PlatformContext.from_env()`` at start
            (and closed at stop) when omitted.
        options: How the agent consumes its events: consumer group and id,
            concurrency, leases, acks, shutdown and registry lease
            (:class:`~soorma.AgentOptions`; default ``AgentOptions()``).
    """

    agent_type: ClassVar[str] = "agent"

    def __init__(
        self,
        *,
        name: str,
        description: str = "",
        version: str = "0.1.0",
        capabilities: Sequence[AgentCapability | str] = (),
        events_consumed: Sequence[EventDefinition | str] = (),
        events_produced: Sequence[EventDefinition | str] = (),
        agent_id: str | None = None,
        context: PlatformContext | None = None,
        options: AgentOptions | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise ValueError("Agent name must be a non-empty string")
        if options is not None and not isinstance(options, AgentOptions):
            raise TypeError(f"options must be a soorma.AgentOptions, not {type(options).__name__}")
        self.name = name
        self.description = description
        self.version = version
        self.capabilities = list(capabilities)
        self.events_consumed = list(events_consumed)
        self.events_produced = list(events_produced)
        self.agent_id = agent_id or name
        self._options = options or AgentOptions()
        self._presence = RegistryPresence(
            name=name,
            agent_id=self.agent_id,
            ttl_seconds=self._options.registry_ttl,
            definition=self.agent_definition,
        )
        self._consumer_arg = self._options.consumer_id
        self._identity: ConsumerIdentity | None = None
        self._consumer_resolved: str | None = None
        # Set by a second Ctrl-C: stop() cancels the handlers instead of waiting.
        self._stop_now = asyncio.Event()
        self._acks: Settlements | None = None
        self._context = context
        self._owns_context = False
        self._table = DispatchTable()
        self._startup_hooks: list[LifecycleHook] = []
        self._shutdown_hooks: list[LifecycleHook] = []
        self._completed = RecentIds(self._options.dedupe_capacity)
        self._leases = LeaseRenewer(
            name=name, group=self.group, visibility_timeout=self.visibility_timeout
        )
        self._intake = Intake(
            name=name,
            completed=self._completed,
            leases=self._leases,
            process=self._process,
            settle_done=self._settle_done,
        )
        self._subscription: Subscription | None = None
        self._consumer: asyncio.Task[None] | None = None
        self._running = False
        self._stopping = False

    # -- options, as the agent applies them (read-only) --------------------------------

    @property
    def options(self) -> AgentOptions:
        """The :class:`~soorma.AgentOptions` the agent was built with."""
        return self._options

    @property
    def group(self) -> str:
        """The consumer group: ``options.group``, else the agent's name."""
        return self._options.group or self.name

    @property
    def max_concurrency(self) -> int:
        """Most events handled at once."""
        return self._options.max_concurrency

    @property
    def prefetch(self) -> int:
        """Most deliveries held unacked at once (``options.prefetch`` or its default)."""
        return self._options.effective_prefetch

    @property
    def visibility_timeout(self) -> float | None:
        """Seconds before an unacked delivery is redelivered (``None``: the service's)."""
        return self._options.visibility_timeout

    @property
    def max_deliveries(self) -> int | None:
        """Deliveries before an event is dead-lettered (``None``: the service's)."""
        return self._options.max_deliveries

    @property
    def start_from(self) -> str | None:
        """Where a new consumer group starts (``"earliest"``; ``None``: now)."""
        return self._options.start_from

    @property
    def shutdown_timeout(self) -> float:
        """Seconds :meth:`stop` waits for in-flight handlers."""
        return self._options.shutdown_timeout

    @property
    def ack_window(self) -> float:
        """Seconds an ack may wait for others to share its request."""
        return self._options.ack_window

    @property
    def ack_batch_size(self) -> int:
        """Queued acks sent at once, without waiting."""
        return self._options.ack_batch_size

    # -- decorators ------------------------------------------------------------------

    def on_event(self, event_type: str | None = None, *, topic: str) -> Callable[[H], H]:
        """Register ``async def handler(event, context)`` for ``topic``/``event_type``.

        Args:
            event_type: Event type or glob pattern (``"order.*"``, ``"*"``).
            topic: Topic to listen on. Required: nothing is inferred.

        Raises:
            TypeError: missing topic or a handler that is not
                ``async def f(event, context)``.
            ValueError: invalid topic or empty event type.
        """
        spec_check = make_spec(
            topic=topic, event_type=event_type, func=placeholder, decorator="on_event()"
        )

        def decorator(func: H) -> H:
            check_handler(func, params=("event", "context"), decorator="on_event()")
            self._add_handler(
                HandlerSpec(
                    topic=spec_check.topic,
                    event_type=spec_check.event_type,
                    func=func,
                    name=getattr(func, "__qualname__", repr(func)),
                )
            )
            return func

        return decorator

    def on_startup(self, func: K) -> K:
        """Register ``async def hook()`` to run when the agent starts (before events)."""
        check_hook(func, decorator="on_startup")
        self._startup_hooks.append(func)
        return func

    def on_shutdown(self, func: K) -> K:
        """Register ``async def hook()`` to run after in-flight handlers finished."""
        check_hook(func, decorator="on_shutdown")
        self._shutdown_hooks.append(func)
        return func

    def _add_handler(self, spec: HandlerSpec) -> None:
        """Record a handler (subclasses register their wrappers through this)."""
        if self._running:
            raise RuntimeError("handlers must be registered before the agent starts")
        self._table.add(spec)

    # -- introspection ---------------------------------------------------------------

    @property
    def handlers(self) -> tuple[HandlerSpec, ...]:
        """The registered handlers, in registration order."""
        return tuple(self._table.handlers)

    @property
    def context(self) -> PlatformContext:
        """The platform context (available once started, or when given)."""
        if self._context is None:
            raise RuntimeError("the agent has no context until start() (or pass context=)")
        return self._context

    @property
    def running(self) -> bool:
        """True between a successful :meth:`start` and :meth:`stop`."""
        return self._running

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` began (no new events are read from then on)."""
        return self._stopping

    @property
    def consumer_id(self) -> str | None:
        """This replica's consumer id (resolved at :meth:`start`, unless given)."""
        return self._consumer_resolved or self._consumer_arg

    @property
    def stream_connections(self) -> int:
        """How many times the agent's stream went live (1 + reconnects)."""
        return self._subscription.connections if self._subscription is not None else 0

    @property
    def topics(self) -> list[str]:
        """Topics of the agent's single stream."""
        return self._table.topics

    @property
    def event_type_filters(self) -> list[str] | None:
        """Event-type patterns sent to the service (``None``: no filter)."""
        return self._table.event_type_filters

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, run start-up hooks, register and open the event stream.

        Returns once the stream is live: events published afterwards reach the agent.
        """
        if self._running:
            return
        if not self._table.handlers:
            raise RuntimeError(f"agent {self.name!r} has no handlers; add one with on_event()")
        # The environment is read once per start: tracing, the context (unless one was
        # given) and the consumer id all come from these settings.
        settings = PlatformSettings.from_env()
        otel.configure(self.name, settings.tracing)
        if self._context is None:
            self._context = PlatformContext.from_env(settings=settings)
            self._context.bus.source = self.name
            self._owns_context = True
        await announce(self)  # who it is, what it listens to, where it connects
        self._running = True
        try:
            for hook in self._startup_hooks:
                await hook()
            await self._presence.start(self.context.registry)
            bus = self.context.bus
            self._identity = ConsumerIdentity(self.group, self._consumer_arg, settings=settings)
            self._consumer_resolved = self._identity.consumer_id
            window = self.ack_window
            if self.visibility_timeout is not None:
                # Settle well inside the redelivery deadline, however short it is.
                window = min(window, self.visibility_timeout / 10)
            # The accelerator switch is the context's, as its bus's coalescing is.
            self._acks = settlements(
                batched=self.context.settings.ack_batching,
                bus=bus,
                group=self.group,
                window=window,
                max_batch=self.ack_batch_size,
                name=self.name,
                clock=self.context.clock,
            )
            self._subscription = bus.subscribe(
                self.topics,
                event_types=self.event_type_filters,
                group=self.group,
                consumer=self._identity.consumer_id,
                start_from=self.start_from,
                visibility_timeout=self.visibility_timeout,
                max_deliveries=self.max_deliveries,
                buffer=self.prefetch,
                prefetch=self.prefetch,
                # The lease renewer reports handler starts (see _leases).
                count_started=True,
            )
            await self._subscription.wait_ready()
            self._leases.clock = self.context.clock
            self._leases.start(bus)
            self._consumer = asyncio.create_task(
                self._intake.consume(
                    self._subscription, prefetch=self.prefetch, concurrency=self.max_concurrency
                ),
                name=f"agent {self.name}",
            )
        except BaseException:
            await self._teardown()
            raise
        logger.info(
            "agent %s ready: topics=%s event_types=%s group=%s consumer=%s (%s)",
            self.name,
            ",".join(self.topics),
            self.event_type_filters or "*",
            self.group,
            self.consumer_id,
            self._identity.source if self._identity else "",
        )

    async def stop(self) -> None:
        """Stop gracefully: stop reading, finish in-flight handlers, deregister, close.

        Handlers still running after ``shutdown_timeout`` are cancelled; their events
        were not acked, so the service redelivers them.
        """
        if not self._running or self._stopping:
            return
        self._stopping = True
        if self._subscription is not None:
            await self._subscription.close()
        if self._consumer is not None:
            self._consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._consumer
        pending = list(self._intake.in_flight.values())
        if pending:
            logger.warning(
                "agent %s stopping: waiting up to %g s for %d handler(s) in progress "
                "(Ctrl-C again to stop at once; their events are then redelivered)",
                self.name,
                self.shutdown_timeout,
                len(pending),
            )
            finished = asyncio.ensure_future(asyncio.wait(pending))
            abandon = asyncio.ensure_future(self._stop_now.wait())
            await asyncio.wait(
                {finished, abandon},
                timeout=self.shutdown_timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
            finished.cancel()
            abandon.cancel()
            late = [task for task in pending if not task.done()]
            for task in late:
                task.cancel()
            if late:
                why = "on a second Ctrl-C" if self._stop_now.is_set() else "at shutdown"
                logger.warning(
                    "agent %s cancelled %d handler(s) %s; their events will be redelivered",
                    self.name,
                    len(late),
                    why,
                )
                await asyncio.wait(late)
        await self._teardown()
        logger.info("agent %s stopped", self.name)

    async def _teardown(self) -> None:
        try:
            await self._leases.stop()
            acks, self._acks = self._acks, None
            if acks is not None:
                # Before the context closes: settle what the finished handlers did.
                await acks.close()
            with contextlib.suppress(Exception):
                await self._presence.stop()
            for hook in self._shutdown_hooks:
                try:
                    await hook()
                except Exception:
                    logger.exception("agent %s: shutdown hook failed", self.name)
        finally:
            if self._owns_context and self._context is not None:
                await self._context.close()
                self._context = None
                self._owns_context = False
            identity, self._identity = self._identity, None
            if identity is not None:
                identity.release()
            self._subscription = None
            self._consumer = None
            self._running = False
            self._stopping = False
            self._stop_now = asyncio.Event()

    async def wait(self) -> None:
        """Wait until the agent's stream fails for good (re-raising why) or it stops."""
        if self._consumer is not None:
            await asyncio.shield(self._consumer)

    async def serve(self) -> None:
        """Start, run until SIGINT/SIGTERM (or a fatal stream error), then stop."""
        loop = asyncio.get_running_loop()
        stop_requested = asyncio.Event()
        installed: list[signal.Signals] = []

        def on_signal() -> None:
            # The first signal stops gracefully; the next one abandons the handlers.
            if stop_requested.is_set():
                self._stop_now.set()
            stop_requested.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, on_signal)
                installed.append(sig)
        failure: BaseException | None = None
        waiter = asyncio.create_task(stop_requested.wait())
        try:
            # A signal while start() still waits for the platform ends the wait too.
            starting = asyncio.create_task(self.start())
            await asyncio.wait({starting, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if not starting.done():
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
                return
            starting.result()
            assert self._consumer is not None
            done, _ = await asyncio.wait(
                {waiter, self._consumer}, return_when=asyncio.FIRST_COMPLETED
            )
            if self._consumer in done and not self._consumer.cancelled():
                failure = self._consumer.exception()
        finally:
            waiter.cancel()
            await self.stop()
            for sig in installed:
                loop.remove_signal_handler(sig)
        if failure is not None:
            raise failure

    def run(self) -> None:
        """Run the agent until SIGINT/SIGTERM (blocking); shuts down gracefully."""
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(self.serve())

    # -- registry --------------------------------------------------------------------

    def agent_definition(self) -> tuple[AgentDefinition, list[EventDefinition]]:
        """The :class:`AgentDefinition` this agent registers, and its standalone events."""
        from soorma.registry import build_agent_definition

        # The event types its handlers take are consumed too, declared or not: the
        # registry then knows who answers what (a caller's "did you mean ...").
        declared = {getattr(e, "event_name", e) for e in self.events_consumed}
        handled = [
            t
            for t in self.event_type_filters or []
            if t not in declared and not any(ch in t for ch in "*?[")
        ]
        return build_agent_definition(
            agent_id=self.agent_id,
            name=self.name,
            description=self.description,
            version=self.version,
            agent_type=self.agent_type,
            capabilities=self.capabilities,
            events_consumed=[*self.events_consumed, *handled],
            events_produced=self.events_produced,
            ttl_seconds=self._options.registry_ttl,
            # The tracker's connected-agents view finds the agent's lag by this group.
            metadata={"consumer_group": self.group},
        )

    # -- dispatch --------------------------------------------------------------------

    async def _process(self, event: Event) -> None:
        error: BaseException | None = None
        with handling(event), _tracing.handler_span(event, self.name):
            for spec in self._table.matching(event):
                try:
                    await call_while_unavailable(spec, event, self.context, agent=self.name)
                except Exception as exc:
                    _tracing.handler_failed(exc)
                    logger.exception(
                        "agent %s: handler %s failed on %s (%s)",
                        self.name,
                        spec.name,
                        event.type,
                        event.id,
                    )
                    error = exc
                    break
        if error is None:
            # Remember first: if the ack is lost, the redelivery is recognised and skipped.
            self._completed.add(event.id)
        self._settle(event, error=error)

    def _settle_done(self, event: Event) -> None:
        """Ack a redelivery of an event already completed here (e.g. our ack was lost)."""
        self._settle(event, error=None)

    def _settle(self, event: Event, *, error: BaseException | None) -> None:
        """Queue the delivery's ack (or nack); the batcher sends it shortly."""
        if event.delivery_id is None or self._acks is None:
            return
        if error is None:
            self._acks.ack(event.delivery_id)
        else:
            self._acks.nack(event.delivery_id, f"{type(error).__name__}: {error}")


__all__ = ["Agent", "AgentArguments"]
