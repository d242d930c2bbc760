"""Settings for the registry-service, grouped by concern (storage and purge; agent cards)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8081
DEFAULT_PURGE_INTERVAL_SECONDS = 30.0
DEFAULT_A2A_GATEWAY_URL = "http://localhost:8085"


_CONFIG = SettingsConfigDict(env_prefix="SOORMA_", extra="ignore")


class RegistryStorageSettings(BaseSettings):
    """Where the registry keeps its agents, and how often expired ones are deleted.

    ``SOORMA_REGISTRY_DATABASE_URL`` overrides the shared ``SOORMA_DATABASE_URL``;
    without either the registry uses an SQLite file under ``SOORMA_DATA_DIR``.
    """

    model_config = _CONFIG

    registry_database_url: str | None = None
    # How often expired agents (and the events only they declared) are deleted.
    # Reads never need the purge: they filter on expiry at query time.
    registry_purge_interval_seconds: float = Field(default=DEFAULT_PURGE_INTERVAL_SECONDS, gt=0)


class CardSettings(BaseSettings):
    """What the agent cards the registry serves point at."""

    model_config = _CONFIG

    # Agent cards point external clients at the A2A gateway, which turns HTTP into events.
    a2a_gateway_url: str = DEFAULT_A2A_GATEWAY_URL


class Settings(ServiceSettings, RegistryStorageSettings, CardSettings):
    """Registry settings (``SOORMA_`` prefix): servicekit's shared groups and the
    registry's own (:data:`GROUPS`), each read from its flat variables."""

    model_config = _CONFIG


GROUPS = (RegistryStorageSettings, CardSettings)
