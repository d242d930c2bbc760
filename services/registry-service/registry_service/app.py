"""App factory for the registry-service."""

from __future__ import annotations

from fastapi import FastAPI

from registry_service.settings import Settings
from servicekit import create_service_app


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the registry-service app. Nothing connects until the lifespan starts."""
    settings = settings or Settings()
    return create_service_app(name="registry-service", settings=settings)
