"""App factory for the gateway-a2a."""

from __future__ import annotations

from fastapi import FastAPI

from gateway_a2a.settings import Settings
from servicekit import create_service_app


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the gateway-a2a app. Nothing connects until the lifespan starts."""
    settings = settings or Settings()
    return create_service_app(name="gateway-a2a", settings=settings)
