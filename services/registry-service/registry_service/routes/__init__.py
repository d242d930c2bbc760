"""HTTP routes of the registry-service."""

from registry_service.routes.agents import router as agents_router
from registry_service.routes.events import router as events_router

__all__ = ["agents_router", "events_router"]
