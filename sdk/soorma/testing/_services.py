"""The platform services a harness runs in process, with test-sized settings.

The service packages are test-time dependencies: they are found through their
``soorma.services`` entry points when a harness starts, never when ``soorma`` (or
``soorma.testing``) is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soorma._services import load_service
from soorma.testing._embeddings import DEFAULT_DIMENSIONS, DETERMINISTIC_MODEL
from soorma_common.clock import Clock

EVENTS_HOST = "events.soorma.test"
MEMORY_HOST = "memory.soorma.test"
REGISTRY_HOST = "registry.soorma.test"
# Not run by the harness: requests to them fail as "service unreachable".
TRACKER_HOST = "tracker.soorma.test"
GATEWAY_HOST = "gateway.soorma.test"

# Redelivery of nacked or expired events is noticed within this many seconds.
CLAIM_INTERVAL_SECONDS = 0.02
# On a manual clock, where a second costs nothing, the event service's loops wake as
# often as in production instead: moving the clock a minute on then wakes each group
# stream's loops a few hundred times, not thousands.
CLOCKED_EVENT_SETTINGS: Mapping[str, Any] = {"claim_interval_seconds": 0.25, "block_seconds": 2.0}
# Long-term memory is embedded with the deterministic test embedder (no model, no network):
# soorma.testing.DeterministicEmbedder reproduces its vectors.
EMBEDDING_MODEL = f"{DETERMINISTIC_MODEL}/{DEFAULT_DIMENSIONS}"
# Background pruning/purging runs at start-up, then never again during a test.
QUIET_INTERVAL_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """One service: its entry-point name, its host in the harness, its settings, and
    whether its ``create_app`` takes the harness's clock (``clock=``)."""

    name: str
    host: str
    defaults: Mapping[str, Any]
    clocked: bool = False

    @property
    def url(self) -> str:
        return f"http://{self.host}"


def service_specs(data_dir: Path) -> tuple[ServiceSpec, ...]:
    """The event, memory and registry services on embedded backends under ``data_dir``.

    Every setting the harness depends on is explicit, so ``SOORMA_*`` variables in the
    test's environment (a JWT mode, a Redis URL) do not leak into it.
    """
    common: dict[str, Any] = {
        "auth_mode": "dev",
        "data_dir": data_dir,
        "database_url": None,
        "access_log": False,
    }
    return (
        ServiceSpec(
            "events",
            EVENTS_HOST,
            {
                **common,
                "event_backend": "memory",
                "claim_interval_seconds": CLAIM_INTERVAL_SECONDS,
                "block_seconds": 0.2,
                # No tracker or gateway reads the platform-wide tap in a harness.
                "tap_topics": [],
            },
            clocked=True,
        ),
        ServiceSpec(
            "memory",
            MEMORY_HOST,
            {
                **common,
                "memory_database_url": f"sqlite+aiosqlite:///{data_dir / 'memory.db'}",
                "memory_prune_interval_seconds": QUIET_INTERVAL_SECONDS,
                "embedding_model": EMBEDDING_MODEL,
            },
            clocked=True,
        ),
        ServiceSpec(
            "registry",
            REGISTRY_HOST,
            {
                **common,
                "registry_database_url": f"sqlite+aiosqlite:///{data_dir / 'registry.db'}",
                "registry_purge_interval_seconds": QUIET_INTERVAL_SECONDS,
            },
        ),
    )


def build_app(
    spec: ServiceSpec, overrides: Mapping[str, Any] | None = None, *, clock: Clock | None = None
) -> Any:
    """The service's ASGI app built with the harness defaults and ``overrides``, on
    ``clock`` when the service takes one (``None``: its default, the system clock).

    Raises:
        ServiceNotInstalled: the service package is not installed (names what to install).
    """
    package = load_service(spec.name)
    settings = package.Settings(**{**spec.defaults, **(overrides or {})})
    if clock is not None and spec.clocked:
        return package.create_app(settings, clock=clock)
    return package.create_app(settings)


__all__ = [
    "CLOCKED_EVENT_SETTINGS",
    "EVENTS_HOST",
    "GATEWAY_HOST",
    "MEMORY_HOST",
    "REGISTRY_HOST",
    "TRACKER_HOST",
    "ServiceSpec",
    "build_app",
    "service_specs",
]
