"""Task and plan contexts, plans, sessions and working memory."""

from memory_service.app import create_app
from memory_service.settings import Settings

__all__ = ["Settings", "create_app"]
