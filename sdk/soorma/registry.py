"""RegistryClient: agents, capabilities, event definitions and discovery.

``context.registry`` talks to the registry service (``ARCHITECTURE.md`` §4). Agents
register themselves through it on start (see :class:`soorma.agents.Agent`); planners and
LLM-driven agents use :meth:`RegistryClient.discover` to find who can do a job and the
schemas needed to talk to them.

Event definitions can be given at three levels: plain names,
:class:`~soorma_common.registry.EventDefinition` (a topic and JSON Schemas), or
:class:`~soorma_common.registry.AgentCapability` (a task with its consumed and produced
events). :func:`build_agent_definition` turns any mix of them into one
:class:`~soorma_common.registry.AgentDefinition`.
"""

from __future__ import annotations

import copy
import difflib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cachetools import TTLCache

from soorma import _tracing
from soorma._payload import check_payload
from soorma.client import ServiceClient
from soorma_common import tracing as otel
from soorma_common.errors import EventDefinitionNotFound, ServiceUnavailable
from soorma_common.events import ACTION_REQUESTS, EventEnvelope
from soorma_common.registry import (
    DEFAULT_AGENT_TTL_SECONDS,
    AgentCapability,
    AgentDefinition,
    DiscoveredAgent,
    EventDefinition,
)

logger = logging.getLogger("soorma.registry")

# Schemas change rarely; a short cache keeps validation on publish off the hot path
# while still seeing a re-registered schema within seconds.
DEFAULT_SCHEMA_CACHE_SECONDS = 5.0
# Definitions kept at most (per client, all tenants); the least recently used go first.
_SCHEMA_CACHE_SIZE = 4096

EventSpec = str | EventDefinition
CapabilitySpec = str | AgentCapability


def _event_name(event: EventSpec) -> str:
    return event if isinstance(event, str) else event.event_name


def build_agent_definition(
    *,
    agent_id: str,
    name: str,
    description: str = "",
    version: str = "1.0.0",
    agent_type: str = "agent",
    capabilities: Iterable[CapabilitySpec] = (),
    events_consumed: Iterable[EventSpec] = (),
    events_produced: Iterable[EventSpec] = (),
    ttl_seconds: int = DEFAULT_AGENT_TTL_SECONDS,
    metadata: Mapping[str, Any] | None = None,
) -> tuple[AgentDefinition, list[EventDefinition]]:
    """Build the registry record for an agent from any mix of the three event levels.

    Args:
        agent_id: Registry id of the agent.
        name: Agent name.
        description: Human description.
        version: Agent version.
        agent_type: ``agent``, ``tool``, ``worker`` or ``planner``.
        capabilities: :class:`AgentCapability` objects, or plain task names (a plain
            name is recorded in ``metadata["tasks"]``: it has no events to register).
        events_consumed: Plain names or :class:`EventDefinition` objects.
        events_produced: Plain names or :class:`EventDefinition` objects.
        ttl_seconds: Lease length; the agent must heartbeat within it.
        metadata: Free-form metadata.

    Returns:
        The definition, and the standalone :class:`EventDefinition` objects (given in
        ``events_consumed``/``events_produced``) that must be registered separately
        because they are not part of a capability.
    """
    caps: list[AgentCapability] = []
    plain_tasks: list[str] = []
    for cap in capabilities:
        if isinstance(cap, AgentCapability):
            caps.append(cap)
        elif isinstance(cap, str) and cap:
            plain_tasks.append(cap)
        else:
            raise TypeError(
                f"capabilities entries must be AgentCapability or str, got {type(cap).__name__}"
            )
    standalone: list[EventDefinition] = []
    consumed: list[str] = []
    produced: list[str] = []
    for target, specs in ((consumed, events_consumed), (produced, events_produced)):
        for spec in specs:
            if isinstance(spec, EventDefinition):
                standalone.append(spec)
            elif not isinstance(spec, str) or not spec:
                raise TypeError(
                    "events_consumed/events_produced entries must be event names or "
                    f"EventDefinition, got {spec!r}"
                )
            if _event_name(spec) not in target:
                target.append(_event_name(spec))
    meta = dict(metadata or {})
    if plain_tasks:
        meta["tasks"] = plain_tasks
    definition = AgentDefinition(
        agent_id=agent_id,
        name=name,
        description=description,
        version=version,
        agent_type=agent_type,
        capabilities=caps,
        events_consumed=consumed,
        events_produced=produced,
        ttl_seconds=ttl_seconds,
        metadata=meta,
    )
    return definition, standalone


class RegistryClient(ServiceClient):
    """Client of the registry service.

    Args:
        schema_cache_seconds: How long :meth:`get_event_cached` keeps a definition
            (or its absence) before asking the service again.
        **kwargs: See :class:`soorma.client.ServiceClient`.
    """

    def __init__(
        self, *, schema_cache_seconds: float = DEFAULT_SCHEMA_CACHE_SECONDS, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._event_cache: TTLCache[tuple[str, str], EventDefinition | None] = TTLCache(
            maxsize=_SCHEMA_CACHE_SIZE, ttl=schema_cache_seconds, timer=time.monotonic
        )

    @property
    def schema_cache_seconds(self) -> float:
        """How long a looked-up definition (or its absence) is kept."""
        return float(self._event_cache.ttl)

    # -- agents ----------------------------------------------------------------------

    async def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        if otel.ENABLED:  # a CLIENT span per call (docs/tracing.md)
            return await _tracing.client_call(
                "registry", self, super()._send, method, path, **kwargs
            )
        return await super()._send(method, path, **kwargs)

    async def register(self, agent: AgentDefinition) -> AgentDefinition:
        """Register (or replace) an agent; its capabilities' events are registered with it.

        Returns:
            The stored definition (with ``last_heartbeat``).

        Raises:
            SchemaInvalid: a capability's schema is not valid JSON Schema.
            ValidationFailed: the definition is malformed (e.g. a task named twice).
        """
        body = agent.model_dump(mode="json", exclude_none=True)
        result = await self._send("POST", "/v1/agents", json=body)
        self._event_cache.clear()
        return AgentDefinition.model_validate(result)

    async def heartbeat(self, agent_id: str) -> AgentDefinition:
        """Extend the agent's lease.

        Raises:
            AgentNotFound: unknown or expired agent; register it again.
        """
        result = await self._send("PUT", f"/v1/agents/{agent_id}/heartbeat")
        return AgentDefinition.model_validate(result)

    async def deregister(self, agent_id: str) -> None:
        """Remove the agent (its events pass to another declarer or are deleted).

        Raises:
            AgentNotFound: unknown agent.
        """
        await self._send("DELETE", f"/v1/agents/{agent_id}")
        self._event_cache.clear()

    async def get_agent(self, agent_id: str, *, include_expired: bool = False) -> AgentDefinition:
        """One agent by id (``AgentNotFound`` once expired unless ``include_expired``)."""
        params = {"include_expired": "true"} if include_expired else None
        result = await self._send("GET", f"/v1/agents/{agent_id}", params=params)
        return AgentDefinition.model_validate(result)

    async def list_agents(
        self,
        *,
        name: str | None = None,
        consumed_event: str | None = None,
        produced_event: str | None = None,
        capability: str | None = None,
        include_expired: bool = False,
    ) -> list[AgentDefinition]:
        """Live agents, filtered (every filter given must match)."""
        params: dict[str, str] = {}
        for key, value in (
            ("name", name),
            ("consumed_event", consumed_event),
            ("produced_event", produced_event),
            ("capability", capability),
        ):
            if value:
                params[key] = value
        if include_expired:
            params["include_expired"] = "true"
        result = await self._send("GET", "/v1/agents", params=params)
        return [AgentDefinition.model_validate(item) for item in result]

    async def consumers_hint(self, event_type: str) -> str | None:
        """Why ``event_type`` may have had no answer, from the live agents' consumed events.

        ``"agents a, b consume 'x' but none answered"`` when someone consumes it;
        ``"no live agent consumes 'x'; did you mean 'y'?"`` when nobody does and a
        consumed event name is close to it. Used by ``BusClient.call`` on a timeout.
        """
        agents = await self.without_retries().list_agents()
        consumers = sorted({a.name for a in agents if event_type in _consumed(a)})
        if consumers:
            return f"agent(s) {', '.join(consumers)} consume {event_type!r} but none answered"
        known = sorted({name for a in agents for name in _consumed(a)})
        close = difflib.get_close_matches(event_type, known, n=3, cutoff=0.6)
        if close:
            guesses = " or ".join(repr(name) for name in close)
            return f"no live agent consumes {event_type!r}; did you mean {guesses}?"
        return f"no live agent consumes {event_type!r}; start one that handles it"

    async def discover(
        self,
        requirements: str | Sequence[str] = (),
        include_events: bool = True,
        *,
        match: str = "any",
    ) -> list[DiscoveredAgent]:
        """Live agents meeting the requirements, with the event contracts to call them.

        Args:
            requirements: Capability task names or consumed event names; empty means
                every live agent.
            include_events: Include payload/response JSON Schemas.
            match: ``"any"`` (meet one requirement) or ``"all"``.
        """
        wanted = [requirements] if isinstance(requirements, str) else list(requirements)
        params = {
            "requirements": ",".join(r for r in wanted if r),
            "include_events": "true" if include_events else "false",
            "match": match,
        }
        result = await self._send("GET", "/v1/agents/discover", params=params)
        return [DiscoveredAgent.model_validate(item) for item in result]

    async def find(self, capability: str) -> DiscoveredAgent | None:
        """The first live agent offering ``capability`` (task name or consumed event)."""
        found = await self.discover([capability])
        return found[0] if found else None

    # -- events ----------------------------------------------------------------------

    async def register_event(self, event: EventDefinition) -> EventDefinition:
        """Register (or replace) an event definition.

        Raises:
            SchemaInvalid: a schema is not valid JSON Schema (draft 2020-12).
            InvalidTopic: the topic name is invalid.
        """
        result = await self._send(
            "POST", "/v1/events", json=event.model_dump(mode="json", exclude_none=True)
        )
        self._event_cache.pop((self._tenant_key(), event.event_name), None)
        return EventDefinition.model_validate(result)

    async def get_event(self, event_name: str) -> EventDefinition:
        """One event definition.

        Raises:
            EventDefinitionNotFound: no event of that name is registered.
        """
        result = await self._send("GET", f"/v1/events/{event_name}")
        return EventDefinition.model_validate(result)

    async def list_events(
        self,
        *,
        topic: str | None = None,
        event_name: str | None = None,
        owner: str | None = None,
    ) -> list[EventDefinition]:
        """Event definitions, filtered by topic, name and owning agent."""
        params = {
            key: value
            for key, value in (("topic", topic), ("event_name", event_name), ("owner", owner))
            if value
        }
        result = await self._send("GET", "/v1/events", params=params)
        return [EventDefinition.model_validate(item) for item in result]

    async def get_event_cached(self, event_name: str) -> EventDefinition | None:
        """:meth:`get_event` through a short per-tenant cache; ``None`` when unregistered.

        An unreachable registry also counts as "no definition" (cached as briefly): the
        checks built on this are a safety net and must not stop the bus.
        """
        key = (self._tenant_key(), event_name)
        try:
            return self._event_cache[key]
        except KeyError:
            pass  # never looked up, or expired
        definition: EventDefinition | None = None
        try:
            result = await self.without_retries()._send("GET", f"/v1/events/{event_name}")
            definition = EventDefinition.model_validate(result)
        except EventDefinitionNotFound:
            pass
        except ServiceUnavailable as exc:
            logger.debug("registry unreachable, %r not validated: %s", event_name, exc)
        self._event_cache[key] = definition
        return definition

    async def validate_envelope(self, envelope: EventEnvelope) -> None:
        """Refuse an ``action-requests`` event whose payload breaks its registered schema.

        Installed as the bus's ``payload_validator`` by ``from_env``. Other
        topics (business facts, results) are not validated: loose coupling.

        Raises:
            PayloadInvalid: naming the failing field.
        """
        if envelope.topic != ACTION_REQUESTS:
            return
        definition = await self.get_event_cached(envelope.type)
        if definition is not None and definition.payload_schema:
            check_payload(envelope.type, definition.payload_schema, envelope.data)

    def without_retries(self) -> RegistryClient:
        """A view of this client that fails at once when the service is unreachable.

        For the SDK's automatic calls (registration, heartbeats, schema look-ups), which
        must not hold up an agent when no registry runs.
        """
        view = copy.copy(self)
        view.connect_retries = 0
        return view

    def _tenant_key(self) -> str:
        # Inside a handler the client acts as the handled event's tenant: cache per tenant.
        return self.headers().get("X-Tenant-ID", "")


def _consumed(agent: AgentDefinition) -> set[str]:
    return {*agent.events_consumed, *(c.consumed_event.event_name for c in agent.capabilities)}


__all__ = [
    "DEFAULT_SCHEMA_CACHE_SECONDS",
    "RegistryClient",
    "build_agent_definition",
]
