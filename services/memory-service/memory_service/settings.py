"""Settings for the memory-service."""

from __future__ import annotations

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8083


class Settings(ServiceSettings):
    pass
