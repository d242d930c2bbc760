"""Event log backends: in-process memory (default) and Redis Streams."""

from __future__ import annotations

from event_service.backends.base import DeadEntry, Entry, EventLog, NewEvent

__all__ = ["DeadEntry", "Entry", "EventLog", "NewEvent"]
