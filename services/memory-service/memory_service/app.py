"""App factory for the memory-service."""

from __future__ import annotations

from fastapi import FastAPI

from memory_service.settings import Settings
from servicekit import create_service_app


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the memory-service app. Nothing connects until the lifespan starts."""
    settings = settings or Settings()
    return create_service_app(name="memory-service", settings=settings)
