"""What the lifespan builds and the routes receive: the log and its helpers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from event_service.backends.base import EventLog
from event_service.fanout import BroadcastHub
from event_service.groups import GroupWaker
from event_service.metrics import EventMetrics
from event_service.settings import Settings
from soorma_common.clock import Clock


@dataclass(slots=True, frozen=True)
class EventState:
    log: EventLog
    hub: BroadcastHub
    waker: GroupWaker
    settings: Settings
    metrics: EventMetrics
    # What group streams wait on (the in-memory log's clock; real time on Redis).
    clock: Clock


async def get_events(request: Request) -> EventState:
    """FastAPI dependency: the event state yielded by the app's lifespan."""
    return request.state.events  # type: ignore[no-any-return]


Events = Annotated[EventState, Depends(get_events)]
