"""Plumbing shared by the Soorma services (not a public API for agent authors)."""

from servicekit.app import create_service_app
from servicekit.auth import CurrentIdentity, Identity, get_identity, resolve_identity
from servicekit.settings import ServiceSettings

__all__ = [
    "CurrentIdentity",
    "Identity",
    "ServiceSettings",
    "create_service_app",
    "get_identity",
    "resolve_identity",
]
