"""Read-only plan and task views, timeouts and a web UI."""

from tracker_service.app import create_app
from tracker_service.settings import Settings

__all__ = ["Settings", "create_app"]
