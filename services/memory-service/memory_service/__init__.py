"""Task and plan contexts, plans, sessions and working memory."""

from memory_service.app import create_app

__all__ = ["create_app"]
