"""Settings for the event-service."""

from __future__ import annotations

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8082


class Settings(ServiceSettings):
    pass
