"""The SDK's settings: everything it takes from the environment, read in this module only.

:meth:`PlatformSettings.from_env` reads every ``SOORMA_*`` variable the SDK uses into one
frozen value: where the services are, who the SDK acts as, how a replica names itself,
which HTTP transport it uses, which accelerators are on, and what OpenTelemetry's
``OTEL_*`` variables ask of tracing. It is called when a :class:`~soorma.PlatformContext`
is built from the environment (an agent's ``start()`` does that) and when a replica's
consumer id is resolved, never at import: a test that sets a variable with
``monkeypatch.setenv`` before building its context or starting its agent sees it. Code
that has settings in hand passes them on instead of reading the environment again.

Two readings stay outside :class:`PlatformSettings`, both in this module:

* an LLM provider's key (:func:`provider_key`): read at each model call, as litellm
  reads it, so the key checked is the key that is used;
* ``NO_COLOR`` (:func:`no_color`), the command line's colour switch.

The OpenTelemetry SDK, once tracing is on, reads its own further variables (sampler,
exporter headers...; docs/tracing.md).

The ``soorma dev`` and ``soorma run`` commands *write* variables, for the processes and
agents they start; writing is not reading, and they do it where they start them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from soorma import _config
from soorma._config import check_url
from soorma.client import Identity
from soorma_common.errors import ConfigurationError, ServiceUnavailable
from soorma_common.tracing import TracingSettings

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

HttpTransport = Literal["lean", "httpx"]
HTTP_TRANSPORTS: tuple[HttpTransport, ...] = ("lean", "httpx")

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformSettings:
    """Where the platform's services are, who the SDK acts as, how a replica names itself.

    Built by hand (``PlatformSettings(event_service_url=...)``), a field not given keeps
    its default rather than the environment's value; :meth:`from_env` reads them all.

    Attributes:
        platform_url: The platform's one address (``SOORMA_URL``), where
            :meth:`discover` asks for each service's URL; ``None``: none.
        event_service_url: Event service (``SOORMA_EVENT_SERVICE_URL``).
        memory_url: Memory service (``SOORMA_MEMORY_URL``).
        registry_url: Registry service (``SOORMA_REGISTRY_URL``).
        tracker_url: Tracker service (``SOORMA_TRACKER_URL``).
        gateway_url: A2A gateway (``SOORMA_GATEWAY_URL``).
        api_token: Bearer token for jwt mode (``SOORMA_API_TOKEN``).
        tenant_id: Tenant in dev mode (``SOORMA_TENANT_ID``).
        user_id: User in dev mode (``SOORMA_USER_ID``).
        service_role: ``"service"`` for a platform service (``SOORMA_SERVICE_ROLE``).
        gateway_api_key: The A2A gateway's API key for ``soorma a2a``
            (``SOORMA_GATEWAY_API_KEY``).
        consumer_id: This process's consumer id (``SOORMA_CONSUMER_ID``; see
            :mod:`soorma.consumer_identity`).
        replica: This process's replica index (``SOORMA_REPLICA``).
        state_dir: Where replica slot locks live (``SOORMA_STATE_DIR``, else
            ``$XDG_CACHE_HOME/soorma``; ``None``: ``~/.cache/soorma``).
        http_transport: ``"lean"``: the SDK's keep-alive transport; ``"httpx"``:
            httpx's own (``SOORMA_HTTP_TRANSPORT``).
        publish_coalesce: Accelerator switch: publishes made while another of the same
            identity is in flight share one request (``SOORMA_PUBLISH_COALESCE``;
            ``False``: one request per publish). Applied by
            :meth:`PlatformContext.from_env <soorma.PlatformContext.from_env>`.
        ack_batching: Accelerator switch: an agent's acks and nacks are sent in
            batches (``SOORMA_ACK_BATCHING``; ``False``: one request per delivery,
            sent at once). Applied when an agent starts, from its context's settings.
        tracing: What OpenTelemetry's ``OTEL_*`` variables (and
            ``SOORMA_OTEL_RECORD_PROMPTS``) ask of tracing; default off
            (docs/tracing.md).
    """

    platform_url: str | None = None
    event_service_url: str = DEFAULT_EVENT_SERVICE_URL
    memory_url: str = DEFAULT_MEMORY_URL
    registry_url: str = DEFAULT_REGISTRY_URL
    tracker_url: str = DEFAULT_TRACKER_URL
    gateway_url: str = DEFAULT_GATEWAY_URL
    api_token: str | None = field(default=None, repr=False)
    tenant_id: str | None = None
    user_id: str | None = None
    service_role: str | None = None
    gateway_api_key: str | None = field(default=None, repr=False)
    consumer_id: str | None = None
    replica: str | None = None
    state_dir: Path | None = None
    http_transport: HttpTransport = "lean"
    publish_coalesce: bool = True
    ack_batching: bool = True
    tracing: TracingSettings = field(default_factory=TracingSettings)

    def __post_init__(self) -> None:
        if self.http_transport not in HTTP_TRANSPORTS:
            raise ValueError(
                f"http_transport must be 'lean' or 'httpx', not {self.http_transport!r}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PlatformSettings:
        """Read the ``SOORMA_*`` variables (``environ``, else ``os.environ``).

        ``SOORMA_URL`` is the platform's one address: each service is found under its
        prefix there (:data:`SERVICE_PREFIXES`). A per-service variable
        (``SOORMA_MEMORY_URL``...) overrides it; without either, the local
        ``soorma dev`` ports. Empty variables count as unset.

        Raises:
            ConfigurationError: a URL variable is not an http(s) URL (fails at once
                instead of being retried as an unreachable service),
                ``SOORMA_HTTP_TRANSPORT`` is neither ``lean`` nor ``httpx``, or an
                accelerator switch is neither true nor false. Unknown
                ``SOORMA_*`` variables are logged, with the closest known name.
        """
        env = os.environ if environ is None else environ
        _config.warn_unknown_variables(env)

        def value(name: str) -> str | None:
            return (env.get(name) or "").strip() or None

        def switch(name: str, default: bool) -> bool:
            raw = (value(name) or "").lower()
            if not raw:
                return default
            if raw in _TRUE or raw in _FALSE:
                return raw in _TRUE
            raise ConfigurationError(
                f"{name}={raw!r}: expected true or false",
                details={"variable": name, "value": raw},
            )

        platform = (value("SOORMA_URL") or "").rstrip("/")
        if platform:
            check_url("SOORMA_URL", platform)

        def service_url(service: str) -> str:
            field_name, variable = _SERVICE_FIELDS[service]
            own = value(variable)
            if own:
                return check_url(variable, own)
            if platform:
                return f"{platform}{SERVICE_PREFIXES[service]}"
            return str(_DEFAULTS[field_name])

        transport = (value("SOORMA_HTTP_TRANSPORT") or "lean").lower()
        if transport not in HTTP_TRANSPORTS:
            raise ConfigurationError(
                f"SOORMA_HTTP_TRANSPORT={transport!r}: expected 'lean' or 'httpx'",
                details={"variable": "SOORMA_HTTP_TRANSPORT", "value": transport},
            )
        state_dir = value("SOORMA_STATE_DIR")
        cache = value("XDG_CACHE_HOME")
        if not state_dir and cache:
            state_dir = str(Path(cache) / "soorma")
        return cls(
            platform_url=platform or None,
            event_service_url=service_url("events"),
            memory_url=service_url("memory"),
            registry_url=service_url("registry"),
            tracker_url=service_url("tracker"),
            gateway_url=service_url("gateway"),
            api_token=value("SOORMA_API_TOKEN"),
            tenant_id=value("SOORMA_TENANT_ID"),
            user_id=value("SOORMA_USER_ID"),
            service_role=value("SOORMA_SERVICE_ROLE"),
            gateway_api_key=value("SOORMA_GATEWAY_API_KEY"),
            consumer_id=value("SOORMA_CONSUMER_ID"),
            replica=value("SOORMA_REPLICA"),
            state_dir=Path(state_dir) if state_dir else None,
            http_transport="httpx" if transport == "httpx" else "lean",
            publish_coalesce=switch("SOORMA_PUBLISH_COALESCE", True),
            ack_batching=switch("SOORMA_ACK_BATCHING", True),
            tracing=TracingSettings.from_env(env),
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
        platform = settings.platform_url
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
        found: dict[str, Any] = {}
        for service, (field_name, variable) in _SERVICE_FIELDS.items():
            if isinstance(services.get(service), str) and not env.get(variable):
                found[field_name] = check_url(f"{url} services.{service}", services[service])
        return dataclasses.replace(settings, **found)

    def service_variables(self) -> dict[str, str]:
        """Each service's URL under its own variable (``SOORMA_MEMORY_URL``...), e.g. to
        hand what :meth:`discover` found to processes that read :meth:`from_env`."""
        return {variable: getattr(self, name) for name, variable in _SERVICE_FIELDS.values()}

    @property
    def identity(self) -> Identity:
        """The identity every client of this context acts as."""
        return Identity(
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            token=self.api_token,
            role=self.service_role,
        )

    @property
    def replica_state_dir(self) -> Path:
        """Where replica slot locks live: ``state_dir``, else ``~/.cache/soorma``."""
        return self.state_dir or Path.home() / ".cache" / "soorma"


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(PlatformSettings)}


def warn_unknown_variables(environ: Mapping[str, str] | None = None) -> None:
    """Log each ``SOORMA_*`` variable that no setting reads, once, naming the closest.

    :meth:`PlatformSettings.from_env` does it too; ``soorma dev`` calls this for the
    variables its services (rather than an SDK client) will read.
    """
    _config.warn_unknown_variables(os.environ if environ is None else environ)


def tracing_settings(environ: Mapping[str, str] | None = None) -> TracingSettings:
    """What the ``OTEL_*`` variables ask of tracing, alone: for a process that reads no
    other SDK setting (``soorma dev``); everything else takes ``settings.tracing``."""
    return TracingSettings.from_env(os.environ if environ is None else environ)


def provider_key(variable: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The LLM provider key held by ``variable`` (``None``: unset or empty).

    Read at each call rather than once: litellm reads the provider's variable when it
    calls the model, so the key the SDK checks (or sends) is the one that is used.
    """
    env = os.environ if environ is None else environ
    return env.get(variable) or None


def no_color(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``NO_COLOR`` asks the command line for plain output."""
    env = os.environ if environ is None else environ
    return bool(env.get("NO_COLOR"))


__all__ = [
    "DEFAULT_EVENT_SERVICE_URL",
    "DEFAULT_GATEWAY_URL",
    "DEFAULT_MEMORY_URL",
    "DEFAULT_REGISTRY_URL",
    "DEFAULT_TRACKER_URL",
    "DISCOVERY_PATH",
    "HTTP_TRANSPORTS",
    "SERVICE_PREFIXES",
    "HttpTransport",
    "PlatformSettings",
    "no_color",
    "provider_key",
    "tracing_settings",
    "warn_unknown_variables",
]
