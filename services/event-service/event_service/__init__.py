"""Event bus: publish, SSE streams, consumer groups, ack and redelivery, dead letters."""

from event_service.app import create_app

__all__ = ["create_app"]
