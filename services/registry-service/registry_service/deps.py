"""FastAPI dependencies: the store the lifespan opened, injected into routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from registry_service.store import RegistryStore


async def get_store(request: Request) -> RegistryStore:
    """The request's store (the lifespan yields it as ``state["store"]``)."""
    store: RegistryStore = request.state.store
    return store


Store = Annotated[RegistryStore, Depends(get_store)]
