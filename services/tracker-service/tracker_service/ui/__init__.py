"""The tracker's web UI: ``GET /ui`` (plans) and ``GET /ui/plans/{id}`` (one plan)."""

from tracker_service.ui.routes import router

__all__ = ["router"]
