"""Settings for the registry-service."""

from __future__ import annotations

from pydantic import Field

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8081
DEFAULT_PURGE_INTERVAL_SECONDS = 30.0
DEFAULT_A2A_GATEWAY_URL = "http://localhost:8085"


class Settings(ServiceSettings):
    """Registry settings (``SOORMA_`` prefix).

    ``SOORMA_REGISTRY_DATABASE_URL`` overrides the shared ``SOORMA_DATABASE_URL``;
    without either the registry uses an SQLite file under ``SOORMA_DATA_DIR``.
    """

    registry_database_url: str | None = None
    # How often expired agents (and the events only they declared) are deleted.
    # Reads never need the purge: they filter on expiry at query time.
    registry_purge_interval_seconds: float = Field(default=DEFAULT_PURGE_INTERVAL_SECONDS, gt=0)
    # Agent cards point external clients at the A2A gateway, which turns HTTP into events.
    a2a_gateway_url: str = DEFAULT_A2A_GATEWAY_URL
