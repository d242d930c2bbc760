"""Settings for the registry-service."""

from __future__ import annotations

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8081


class Settings(ServiceSettings):
    pass
