"""Read-only plan and task views, timeouts and a web UI."""

from tracker_service.app import create_app

__all__ = ["create_app"]
