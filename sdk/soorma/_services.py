"""How the SDK finds the platform's services: by entry point, never by module name.

Each service package declares itself in the ``soorma.services`` entry-point group
(``memory = "memory_service"`` in its ``pyproject.toml``). The package named there
exports ``create_app(settings)`` and its ``Settings`` class. ``soorma dev`` and
``soorma.testing`` load services through :func:`load_service` when they start one, so
``import soorma`` never imports a service.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

SERVICES_GROUP = "soorma.services"
# The folder of each service in the monorepo, for the hint when one is not installed.
_FOLDERS = {
    "events": "event-service",
    "memory": "memory-service",
    "registry": "registry-service",
    "tracker": "tracker-service",
    "gateway": "gateway-a2a",
}


class ServiceNotInstalled(ImportError):
    """No installed package declares the service in the ``soorma.services`` group."""


def load_service(name: str) -> Any:
    """The service package registered as ``name`` (``create_app`` and ``Settings``).

    Raises:
        ServiceNotInstalled: no installed package declares ``name``.
    """
    found = entry_points(group=SERVICES_GROUP, name=name)
    if not found:
        folder = _FOLDERS.get(name, name)
        raise ServiceNotInstalled(
            f"no installed package provides the {name!r} service (entry point group "
            f"{SERVICES_GROUP!r}): install the platform's services, e.g. "
            f"`pip install -e services/{folder}`"
        )
    return next(iter(found)).load()


__all__ = ["SERVICES_GROUP", "ServiceNotInstalled", "load_service"]
