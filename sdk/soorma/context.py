"""PlatformContext: the clients a handler uses (bus, memory, registry, tracker, toolkit)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from soorma.ai.toolkit import EventToolkit
from soorma.bus import BusClient
from soorma.client import make_http_client
from soorma.memory import MemoryClient
from soorma.registry import RegistryClient
from soorma.settings import PlatformSettings
from soorma.tracker import TrackerClient
from soorma_common import tracing as otel
from soorma_common.clock import SYSTEM_CLOCK, Clock
from soorma_common.events import PLAN_CANCEL_REQUESTED, SYSTEM_EVENTS

# Pool sized for an agent's default concurrency plus its stream and acks.
DEFAULT_HTTP_LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=32)


class PlatformContext:
    """The platform clients handed to every handler as ``context``.

    Args:
        bus: Event-service client.
        memory: Memory-service client (``from_env()`` always builds one).
        registry: Registry-service client (``None`` until configured).
        tracker: Tracker client (``None`` until configured).
        toolkit: Optional helpers (e.g. LLM utilities).
        settings: The settings the clients were built from.
        http: The shared HTTP client; closed by :meth:`close` when ``owns_http``.
        owns_http: Whether this context created ``http`` and must close it.
        clock: Time for the agent's leases, claims and ack batching (a test passes a
            ``ManualClock`` and advances it instead of sleeping).
    """

    def __init__(
        self,
        *,
        bus: BusClient,
        memory: MemoryClient | None = None,
        registry: Any = None,
        tracker: Any = None,
        toolkit: Any = None,
        settings: PlatformSettings | None = None,
        http: httpx.AsyncClient | None = None,
        owns_http: bool = False,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.bus = bus
        self.memory = memory
        self.registry = registry
        self.tracker = tracker
        self.toolkit = toolkit
        self.settings = settings or PlatformSettings()
        self.http = http or bus.http
        self._owns_http = owns_http
        self.clock = clock

    @classmethod
    def from_env(
        cls,
        *,
        http: httpx.AsyncClient | None = None,
        settings: PlatformSettings | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> PlatformContext:
        """Build a context from ``SOORMA_*`` environment variables.

        Args:
            http: Shared client to use (the caller keeps ownership); a new one is
                created and closed with the context otherwise, on the transport the
                settings name (``http_transport``: the SDK's lean keep-alive one unless
                ``SOORMA_HTTP_TRANSPORT=httpx``).
            settings: Use these settings instead of reading the environment (their
                ``tracing`` and ``publish_coalesce`` included).
            environ: Environment mapping to read instead of ``os.environ`` (unless
                ``settings`` are given).
        """
        settings = settings or PlatformSettings.from_env(environ)
        otel.configure("soorma-client", settings.tracing)
        owns_http = http is None
        client = http or make_http_client(
            limits=DEFAULT_HTTP_LIMITS, transport=settings.http_transport
        )
        identity = settings.identity
        bus = BusClient(
            base_url=settings.event_service_url,
            http=client,
            identity=identity,
            coalesce=settings.publish_coalesce,
        )
        memory = MemoryClient(base_url=settings.memory_url, http=client, identity=identity)
        registry = RegistryClient(base_url=settings.registry_url, http=client, identity=identity)
        # Action requests are checked against their registered schemas before they are
        # published (a caller learns of a bad payload at once); other topics are not.
        bus.payload_validator = registry.validate_envelope
        # A call() nobody answers says who consumes its event type, or what was meant.
        bus.consumers_hint = registry.consumers_hint
        toolkit = EventToolkit(registry=registry)
        tracker = TrackerClient(base_url=settings.tracker_url, http=client, identity=identity)
        return cls(
            bus=bus,
            memory=memory,
            registry=registry,
            tracker=tracker,
            toolkit=toolkit,
            settings=settings,
            http=client,
            owns_http=owns_http,
        )

    async def cancel_plan(self, plan_id: str, reason: str) -> str:
        """Ask the planner that owns ``plan_id`` to cancel it.

        Publishes ``plan.cancel_requested`` on ``system-events`` as this context's
        identity; the owning planner ends the plan ``cancelled`` with ``reason``,
        answers its goal with the cancellation and cancels its sub-plans. A plan of
        another tenant is out of reach: the planner reads plans as the requester.
        Follow the outcome with :meth:`TrackerClient.wait_for_plan`.

        Returns:
            The request's event id.
        """
        return await self.bus.publish(
            SYSTEM_EVENTS,
            PLAN_CANCEL_REQUESTED,
            {"plan_id": plan_id, "reason": reason},
            correlation_id=plan_id,
            plan_id=plan_id,
        )

    async def close(self) -> None:
        """Close the shared HTTP client if this context created it."""
        if self._owns_http:
            await self.http.aclose()

    async def __aenter__(self) -> PlatformContext:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["DEFAULT_HTTP_LIMITS", "PlatformContext"]
