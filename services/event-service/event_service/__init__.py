"""Event bus: publish, SSE streams, consumer groups, ack and redelivery, dead letters."""

from event_service.app import create_app
from event_service.settings import Settings

__all__ = ["Settings", "create_app"]
