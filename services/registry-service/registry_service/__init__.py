"""Agents, capabilities, event schemas and discovery."""

from registry_service.app import create_app
from registry_service.settings import Settings
from registry_service.sql_store import SqlRegistryStore
from registry_service.store import RegistryStore

__all__ = ["RegistryStore", "Settings", "SqlRegistryStore", "create_app"]
