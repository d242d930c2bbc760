"""Agents, capabilities, event schemas and discovery."""

from registry_service.app import create_app

__all__ = ["create_app"]
