"""PlatformContext: the clients a handler uses (bus, memory, registry, tracker, toolkit)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from soorma._config import check_url, warn_unknown_variables
from soorma.ai.toolkit import EventToolkit
from soorma.bus import BusClient
from soorma.client import Identity, make_http_client
from soorma.memory import MemoryClient
from soorma.registry import RegistryClient
from soorma.tracker import TrackerClient
from soorma_common import tracing as otel
from soorma_common.clock import SYSTEM_CLOCK, Clock
from soorma_common.errors import ConfigurationError, ServiceUnavailable
from soorma_common.events import PLAN_CANCEL_REQUESTED, SYSTEM_EVENTS

DEFAULT_EVENT_SERVICE_URL = "http://127.0.0.1:8082"
DEFAULT_MEMORY_URL = "http://127.0.0.1:8083"
DEFAULT_REGISTRY_URL = "http://127.0.0.1:8081"
DEFAULT_TRACKER_URL = "http://127.0.0.1:8084"
DEFAULT_GATEWAY_URL = "http://127.0.0.1:8085"

# Where each service is under the platform's one address (``SOORMA_URL``): ``soorma dev``
# serves them there, and lists them at ``/.well-known/soorma.json``.
SERVICE_PREFIXES: dict[str, str] = {
    "registry": "/registry",
    "events": "/events",
    "memory": "/memory",
    "tracker": "/tracker",
    "gateway": "/gateway",
}

DISCOVERY_PATH = "/.well-known/soorma.json"
DISCOVERY_TIMEOUT = 5.0
# Each service of the discovery document: its settings field and its own variable.
_SERVICE_FIELDS = {
    "events": ("event_service_url", "SOORMA_EVENT_SERVICE_URL"),
    "memory": ("memory_url", "SOORMA_MEMORY_URL"),
    "registry": ("registry_url", "SOORMA_REGISTRY_URL"),
    "tracker": ("tracker_url", "SOORMA_TRACKER_URL"),
    "gateway": ("gateway_url", "SOORMA_GATEWAY_URL"),
}

# Pool sized for an agent's default concurrency plus its stream and acks.
DEFAULT_HTTP_LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=32)


@dataclass(frozen=True, slots=True)
class PlatformSettings:
    """Where the platform's services are and who the SDK acts as.

    Where the services are and who the SDK acts as is read from the environment only
    by :meth:`from_env`. Two settings are read where they are used instead: a
    replica's consumer id (``SOORMA_CONSUMER_ID``, ``SOORMA_REPLICA``, see
    :mod:`soorma.consumer_identity`) and an LLM provider's key (``OPENAI_API_KEY``
    ..., read by the ChoreographyPlanner when it calls the model). OpenTelemetry's
    standard ``OTEL_*`` variables are read once per process when an agent starts or a
    context is built (see ``soorma.otel.configure`` and docs/tracing.md).
    """

    event_service_url: str = DEFAULT_EVENT_SERVICE_URL
    memory_url: str = DEFAULT_MEMORY_URL
    registry_url: str = DEFAULT_REGISTRY_URL
    tracker_url: str = DEFAULT_TRACKER_URL
    gateway_url: str = DEFAULT_GATEWAY_URL
    api_token: str | None = None
    tenant_id: str | None = None
    user_id: str | None = None
    service_role: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PlatformSettings:
        """Read ``SOORMA_*`` variables.

        ``SOORMA_URL`` is the platform's one address: each service is found under its
        prefix there (:data:`SERVICE_PREFIXES`). A per-service variable
        (``SOORMA_MEMORY_URL``...) overrides it; without either, the local
        ``soorma dev`` ports.

        Raises:
            ConfigurationError: a URL variable is not an http(s) URL (fails at once
                instead of being retried as an unreachable service). Unknown
                ``SOORMA_*`` variables are logged, with the closest known name.
        """
        env = os.environ if environ is None else environ
        warn_unknown_variables(env)
        platform = (env.get("SOORMA_URL") or "").rstrip("/")
        if platform:
            check_url("SOORMA_URL", platform)

        def get(name: str, service: str, default: str) -> str:
            if env.get(name):
                return check_url(name, env[name])
            return f"{platform}{SERVICE_PREFIXES[service]}" if platform else default

        return cls(
            event_service_url=get("SOORMA_EVENT_SERVICE_URL", "events", DEFAULT_EVENT_SERVICE_URL),
            memory_url=get("SOORMA_MEMORY_URL", "memory", DEFAULT_MEMORY_URL),
            registry_url=get("SOORMA_REGISTRY_URL", "registry", DEFAULT_REGISTRY_URL),
            tracker_url=get("SOORMA_TRACKER_URL", "tracker", DEFAULT_TRACKER_URL),
            gateway_url=get("SOORMA_GATEWAY_URL", "gateway", DEFAULT_GATEWAY_URL),
            api_token=env.get("SOORMA_API_TOKEN") or None,
            tenant_id=env.get("SOORMA_TENANT_ID") or None,
            user_id=env.get("SOORMA_USER_ID") or None,
            service_role=env.get("SOORMA_SERVICE_ROLE") or None,
        )

    @classmethod
    async def discover(
        cls, http: httpx.AsyncClient, environ: Mapping[str, str] | None = None
    ) -> PlatformSettings:
        """:meth:`from_env`, with each service's URL as the platform at ``SOORMA_URL``
        lists it (``GET /.well-known/soorma.json``); per-service variables still win.

        Raises:
            ServiceUnavailable: nothing answers at ``SOORMA_URL``.
            ConfigurationError: what answers there is not a Soorma platform.
        """
        env = os.environ if environ is None else environ
        settings = cls.from_env(env)
        platform = (env.get("SOORMA_URL") or "").rstrip("/")
        if not platform:
            return settings
        url = f"{platform}{DISCOVERY_PATH}"
        try:
            response = await http.get(url, timeout=DISCOVERY_TIMEOUT)
        except httpx.TransportError as exc:
            raise ServiceUnavailable(
                f"cannot reach the platform at SOORMA_URL={platform} ({exc or type(exc).__name__});"
                " is it running (`soorma dev`)?",
                details={"url": platform},
            ) from None
        try:
            services = response.json()["services"] if response.is_success else None
        except (ValueError, KeyError, TypeError):
            services = None
        if not isinstance(services, dict):
            raise ConfigurationError(
                f"SOORMA_URL={platform} is not a Soorma platform address (GET {url} answered "
                f"HTTP {response.status_code}); use the address `soorma dev` prints",
                details={"url": platform},
            )
        found: dict[str, str] = {}
        for service, (field, variable) in _SERVICE_FIELDS.items():
            if isinstance(services.get(service), str) and not env.get(variable):
                found[field] = check_url(f"{url} services.{service}", services[service])
        return dataclasses.replace(settings, **found)

    def service_variables(self) -> dict[str, str]:
        """Each service's URL under its own variable (``SOORMA_MEMORY_URL``...), e.g. to
        hand what :meth:`discover` found to processes that read :meth:`from_env`."""
        return {variable: getattr(self, field) for field, variable in _SERVICE_FIELDS.values()}

    @property
    def identity(self) -> Identity:
        """The identity every client of this context acts as."""
        return Identity(
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            token=self.api_token,
            role=self.service_role,
        )


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
                created and closed with the context otherwise, on the SDK's lean
                keep-alive transport (``SOORMA_HTTP_TRANSPORT=httpx``: httpx's own).
            settings: Use these settings instead of reading the environment.
            environ: Environment mapping to read instead of ``os.environ``.
        """
        settings = settings or PlatformSettings.from_env(environ)
        otel.configure("soorma-client", environ=environ)
        owns_http = http is None
        client = http or make_http_client(limits=DEFAULT_HTTP_LIMITS, environ=environ)
        identity = settings.identity
        bus = BusClient(base_url=settings.event_service_url, http=client, identity=identity)
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


__all__ = [
    "DEFAULT_EVENT_SERVICE_URL",
    "DEFAULT_GATEWAY_URL",
    "DEFAULT_MEMORY_URL",
    "DEFAULT_REGISTRY_URL",
    "DEFAULT_TRACKER_URL",
    "SERVICE_PREFIXES",
    "PlatformContext",
    "PlatformSettings",
]
