"""A2A protocol gateway for external clients."""

from gateway_a2a.app import create_app

__all__ = ["create_app"]
