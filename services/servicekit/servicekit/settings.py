"""Settings shared by every service, grouped by concern (pydantic-settings, ``SOORMA_``).

Each concern is a small settings class of its own, read from the same flat variables
(``SOORMA_AUTH_MODE``, ``SOORMA_MAX_HEADER_BYTES``...), so code that needs one concern
takes that class (``resolve_identity(headers, settings: AuthSettings)``) and a test
builds only what it exercises:

* :class:`AuthSettings`: how a request's identity is found (dev headers or JWT);
* :class:`LimitsSettings`: what a request may weigh and how long its head may take;
* :class:`LoggingSettings`: log level, log format and access log;
* :class:`MetricsSettings`: ``GET /metrics``;
* :class:`StorageSettings`: where the data lives and how often the backends are checked;
* :class:`TracingSettings`: OpenTelemetry's standard ``OTEL_*`` variables (no prefix) and
  ``SOORMA_OTEL_RECORD_PROMPTS``, read here with the rest (servicekit.tracing turns them
  into :class:`soorma_common.tracing.TracingSettings`).

:class:`ServiceSettings` composes them all; each service's ``Settings`` subclasses it and
adds its own fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from servicekit.logging import LOG_FORMATS

_CONFIG = SettingsConfigDict(env_prefix="SOORMA_", extra="ignore")


class AuthSettings(BaseSettings):
    """How a request's identity is found (servicekit.auth; docs/auth.md)."""

    model_config = _CONFIG

    # dev: X-Tenant-ID / X-User-ID headers (or the defaults below); jwt: a bearer token.
    auth_mode: Literal["dev", "jwt"] = "dev"
    jwt_secret: str | None = None
    jwt_public_key: str | None = None
    jwt_algorithms: list[str] = Field(default_factory=lambda: ["HS256"])
    jwt_audience: str | None = None
    # Tokens must carry ``exp`` (SOORMA_JWT_REQUIRE_EXP=false accepts tokens that never expire).
    jwt_require_exp: bool = True
    default_tenant: str = "default"
    default_user: str = "anonymous"


class LimitsSettings(BaseSettings):
    """What one request may weigh, and how long its head may take to arrive."""

    model_config = _CONFIG

    max_payload_bytes: int = 256 * 1024
    # Request line + headers; larger heads are answered 431 (servicekit.server).
    max_header_bytes: int = Field(default=32 * 1024, ge=1024)
    # A connection must send a complete request head this soon after it opens (or after
    # it starts its next request), else it is answered 408 and closed.
    header_timeout_seconds: float = Field(default=10.0, gt=0)


class LoggingSettings(BaseSettings):
    """Log level, format and the per-request access log (servicekit.logging)."""

    model_config = _CONFIG

    log_level: str = "INFO"
    # ``json``: one JSON object a line (containers); ``text``: readable lines (what
    # ``soorma dev`` sets unless ``--log-format json``). Any case; empty: ``json``.
    log_format: Literal["json", "text"] = "json"
    access_log: bool = False

    @field_validator("log_format", mode="before")
    @classmethod
    def _known_format(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        chosen = value.strip().lower() or "json"
        if chosen not in LOG_FORMATS:
            raise ValueError(
                f"SOORMA_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, got {chosen!r}"
            )
        return chosen


class MetricsSettings(BaseSettings):
    """Prometheus metrics on ``GET /metrics`` (servicekit.metrics; docs/operations.md)."""

    model_config = _CONFIG

    metrics_enabled: bool = True
    # When set, /metrics needs "Authorization: Bearer <token>"; unset, it is open on the
    # service port (it then carries no per-tenant data).
    metrics_token: str | None = None
    # Label the event service's counters by tenant (unbounded: one series per tenant);
    # needs metrics_token.
    metrics_tenant_label: bool = False
    # Gauges read from storage (DLQ size, lag, pending, tasks by state) are refreshed at
    # most this often, however often Prometheus scrapes.
    metrics_cache_seconds: float = Field(default=5.0, ge=0)

    @model_validator(mode="after")
    def _tenant_metrics_need_a_token(self) -> MetricsSettings:
        if self.metrics_tenant_label and not self.metrics_token:
            raise ValueError(
                "SOORMA_METRICS_TENANT_LABEL=true needs SOORMA_METRICS_TOKEN: per-tenant "
                "metrics must not be readable by anyone who can reach the port"
            )
        return self


class StorageSettings(BaseSettings):
    """Where a service keeps its data, and how often its backends are checked."""

    model_config = _CONFIG

    data_dir: Path = Path(".soorma")
    database_url: str | None = None
    # How often the backends (database, Redis) are checked, to log one lost and its
    # return once each (servicekit.readiness); 0 turns the watch off.
    backend_check_seconds: float = Field(default=5.0, ge=0)


def _otel(variable: str) -> AliasChoices:
    """Read from OpenTelemetry's own variable (no ``SOORMA_`` prefix); built by field name."""
    return AliasChoices(variable, variable.lower())


class TracingSettings(BaseSettings):
    """Tracing (servicekit.tracing; docs/tracing.md): the variables that decide whether a
    tracer provider is installed, and which. Unset, tracing is off.

    Kept as the raw text: one parser (``soorma_common.tracing.TracingSettings.from_env``)
    reads them for the SDK and the services alike, so an empty or odd value means the
    same in both.
    """

    model_config = SettingsConfigDict(env_prefix="SOORMA_", extra="ignore", populate_by_name=True)

    otel_sdk_disabled: str | None = Field(default=None, validation_alias=_otel("OTEL_SDK_DISABLED"))
    otel_traces_exporter: str | None = Field(
        default=None, validation_alias=_otel("OTEL_TRACES_EXPORTER")
    )
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None, validation_alias=_otel("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    otel_exporter_otlp_traces_endpoint: str | None = Field(
        default=None, validation_alias=_otel("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    otel_exporter_otlp_protocol: str | None = Field(
        default=None, validation_alias=_otel("OTEL_EXPORTER_OTLP_PROTOCOL")
    )
    otel_exporter_otlp_traces_protocol: str | None = Field(
        default=None, validation_alias=_otel("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    )
    otel_service_name: str | None = Field(default=None, validation_alias=_otel("OTEL_SERVICE_NAME"))
    otel_instrumentation_genai_capture_message_content: str | None = Field(
        default=None,
        validation_alias=_otel("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
    )
    # LLM spans carry prompt and answer text (the services make no LLM calls of their own;
    # read for the same meaning as in the SDK).
    otel_record_prompts: str | None = None


class ServiceSettings(
    AuthSettings,
    LimitsSettings,
    LoggingSettings,
    MetricsSettings,
    StorageSettings,
    TracingSettings,
):
    """Every shared concern in one value; each service subclasses it with its own fields.

    Environment variables use the ``SOORMA_`` prefix (``SOORMA_AUTH_MODE=jwt``).
    """

    model_config = _CONFIG


__all__ = [
    "AuthSettings",
    "LimitsSettings",
    "LoggingSettings",
    "MetricsSettings",
    "ServiceSettings",
    "StorageSettings",
    "TracingSettings",
]
