"""Settings shared by every service (pydantic-settings, ``SOORMA_`` prefix)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServiceSettings(BaseSettings):
    """Base settings; each service subclasses it and adds its own fields.

    Environment variables use the ``SOORMA_`` prefix (``SOORMA_AUTH_MODE=jwt``).
    """

    model_config = SettingsConfigDict(env_prefix="SOORMA_", extra="ignore")

    auth_mode: Literal["dev", "jwt"] = "dev"
    jwt_secret: str | None = None
    jwt_public_key: str | None = None
    jwt_algorithms: list[str] = Field(default_factory=lambda: ["HS256"])
    jwt_audience: str | None = None
    # Tokens must carry ``exp`` (SOORMA_JWT_REQUIRE_EXP=false accepts tokens that never expire).
    jwt_require_exp: bool = True
    default_tenant: str = "default"
    default_user: str = "anonymous"

    data_dir: Path = Path(".soorma")
    database_url: str | None = None
    log_level: str = "INFO"
    access_log: bool = False
    max_payload_bytes: int = 256 * 1024
    # Request line + headers; larger heads are answered 431 (servicekit.server).
    max_header_bytes: int = Field(default=32 * 1024, ge=1024)
    # A connection must send a complete request head this soon after it opens (or after
    # it starts its next request), else it is answered 408 and closed.
    header_timeout_seconds: float = Field(default=10.0, gt=0)

    # How often the backends (database, Redis) are checked, to log one lost and its
    # return once each (servicekit.readiness); 0 turns the watch off.
    backend_check_seconds: float = Field(default=5.0, ge=0)

    # Prometheus metrics on GET /metrics (servicekit.metrics; docs/operations.md).
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
    def _tenant_metrics_need_a_token(self) -> ServiceSettings:
        if self.metrics_tenant_label and not self.metrics_token:
            raise ValueError(
                "SOORMA_METRICS_TENANT_LABEL=true needs SOORMA_METRICS_TOKEN: per-tenant "
                "metrics must not be readable by anyone who can reach the port"
            )
        return self
