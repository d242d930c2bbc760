"""Event definitions: ``/v1/events``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, status

from registry_service.deps import Store
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from servicekit.jsoncheck import NulFree
from soorma_common.registry import EventDefinition

router = APIRouter(prefix="/v1/events", tags=["events"], responses=error_responses(422))

# NUL cannot reach a Postgres text comparison: 422 naming the parameter instead.
Filter = Annotated[str | None, Query(), NulFree]


@router.post("", status_code=status.HTTP_201_CREATED, responses=error_responses(413))
async def register_event(
    event: EventDefinition, identity: CurrentIdentity, store: Store
) -> EventDefinition:
    """Register or replace an event definition (schemas must be valid draft 2020-12)."""
    return await store.upsert_event(identity.tenant_id, event)


@router.get("")
async def list_events(
    identity: CurrentIdentity,
    store: Store,
    topic: Filter = None,
    event_name: Filter = None,
    owner: Filter = None,
) -> list[EventDefinition]:
    """Event definitions of the caller's tenant, filtered by topic, name and owner agent."""
    return await store.list_events(
        identity.tenant_id, topic=topic, event_name=event_name, owner=owner
    )


@router.get("/{event_name}", responses=error_responses(404))
async def get_event(
    event_name: Annotated[str, Path(), NulFree], identity: CurrentIdentity, store: Store
) -> EventDefinition:
    """One event definition by name."""
    return await store.get_event(identity.tenant_id, event_name)
