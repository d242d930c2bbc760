"""What the lifespan builds and the routes receive."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine

from soorma import BusClient, MemoryClient
from soorma.registry import RegistryClient
from tracker_service.settings import Settings


@dataclass(slots=True)
class TrackerState:
    engine: AsyncEngine
    settings: Settings
    memory: MemoryClient | None  # acting as a platform service
    projector: Any = None
    bus: BusClient | None = None  # acting as a platform service, on a caller's behalf
    registry: RegistryClient | None = None  # acting as a platform service, read-only


async def get_tracker(request: Request) -> TrackerState:
    """FastAPI dependency: the tracker state yielded by the app's lifespan."""
    return request.state.tracker  # type: ignore[no-any-return]


Tracker = Annotated[TrackerState, Depends(get_tracker)]
