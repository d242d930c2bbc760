"""Settings for the tracker-service."""

from __future__ import annotations

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8084


class Settings(ServiceSettings):
    pass
