"""App factory for the tracker-service."""

from __future__ import annotations

from fastapi import FastAPI

from servicekit import create_service_app
from tracker_service.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the tracker-service app. Nothing connects until the lifespan starts."""
    settings = settings or Settings()
    return create_service_app(name="tracker-service", settings=settings)
