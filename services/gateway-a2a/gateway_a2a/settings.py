"""Settings for the gateway-a2a."""

from __future__ import annotations

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8085


class Settings(ServiceSettings):
    pass
