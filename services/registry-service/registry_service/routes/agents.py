"""Agents, discovery, heartbeats and agent cards: ``/v1/agents``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response, status

from registry_service.card import agent_card
from registry_service.deps import Store
from registry_service.store import MatchMode
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from servicekit.jsoncheck import NulFree
from soorma_common.registry import AgentCapability, AgentDefinition, DiscoveredAgent

router = APIRouter(prefix="/v1/agents", tags=["agents"], responses=error_responses(422))

# NUL cannot reach a Postgres text comparison: 422 naming the parameter instead.
AgentId = Annotated[str, Path(), NulFree]
Filter = Annotated[str | None, Query(), NulFree]


@router.post(
    "",
    responses={200: {"description": "Existing agent replaced"}, **error_responses(413)},
    status_code=status.HTTP_201_CREATED,
)
async def register_agent(
    agent: AgentDefinition, identity: CurrentIdentity, store: Store, response: Response
) -> AgentDefinition:
    """Register an agent, or replace it when ``agent_id`` is known (201 new, 200 replaced).

    Registration counts as a heartbeat. The capabilities' events are registered too,
    owned by the agent.
    """
    stored, created = await store.upsert_agent(identity.tenant_id, agent)
    if not created:
        response.status_code = status.HTTP_200_OK
    return stored


@router.get("")
async def list_agents(
    identity: CurrentIdentity,
    store: Store,
    name: Filter = None,
    consumed_event: Filter = None,
    produced_event: Filter = None,
    capability: Filter = None,
    include_expired: bool = False,
) -> list[AgentDefinition]:
    """Live agents of the caller's tenant; every filter given must match."""
    return await store.list_agents(
        identity.tenant_id,
        name=name,
        consumed_event=consumed_event,
        produced_event=produced_event,
        capability=capability,
        include_expired=include_expired,
    )


def _strip_schemas(cap: AgentCapability) -> AgentCapability:
    bare = {"payload_schema": None, "response_schema": None}
    return cap.model_copy(
        update={
            "consumed_event": cap.consumed_event.model_copy(update=bare),
            "produced_events": [e.model_copy(update=bare) for e in cap.produced_events],
        }
    )


@router.get("/discover")
async def discover_agents(
    identity: CurrentIdentity,
    store: Store,
    requirements: Annotated[
        str,
        Query(description="Comma-separated capability task names or consumed event names."),
        NulFree,
    ] = "",
    include_events: Annotated[bool, Query(description="Include event JSON Schemas.")] = True,
    match: Annotated[
        MatchMode, Query(description="'any': meet one requirement; 'all': meet every one.")
    ] = "any",
) -> list[DiscoveredAgent]:
    """Live agents that provide the required capabilities, with their event contracts.

    An agent meets a requirement when one of its capabilities has that ``task_name`` or
    consumes an event of that name. Without requirements every live agent is returned.
    """
    wanted = [r.strip() for r in requirements.split(",") if r.strip()]
    agents = await store.discover(identity.tenant_id, wanted, match=match)
    found = []
    for agent in agents:
        caps = (
            agent.capabilities
            if include_events
            else [_strip_schemas(c) for c in agent.capabilities]
        )
        found.append(
            DiscoveredAgent(
                agent_id=agent.agent_id,
                name=agent.name,
                description=agent.description,
                version=agent.version,
                capabilities=caps,
            )
        )
    return found


@router.get("/{agent_id}", responses=error_responses(404))
async def get_agent(
    agent_id: AgentId, identity: CurrentIdentity, store: Store, include_expired: bool = False
) -> AgentDefinition:
    """One agent (404 once it has expired, unless ``include_expired``)."""
    return await store.get_agent(identity.tenant_id, agent_id, include_expired=include_expired)


@router.put("/{agent_id}/heartbeat", responses=error_responses(404))
async def heartbeat(agent_id: AgentId, identity: CurrentIdentity, store: Store) -> AgentDefinition:
    """Extend the agent's lease by its ``ttl_seconds``.

    404 ``agent_not_found`` when the agent is unknown or already expired: re-register it.
    """
    return await store.heartbeat(identity.tenant_id, agent_id)


@router.delete(
    "/{agent_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404)
)
async def deregister_agent(agent_id: AgentId, identity: CurrentIdentity, store: Store) -> None:
    """Remove the agent; events it owns pass to another live declarer or are deleted."""
    await store.delete_agent(identity.tenant_id, agent_id)


@router.get("/{agent_id}/card", responses=error_responses(404))
async def get_agent_card(
    agent_id: AgentId, identity: CurrentIdentity, store: Store, request: Request
) -> dict[str, Any]:
    """The agent as an A2A Agent Card (legacy ``soorma_common.a2a`` shape)."""
    agent = await store.get_agent(identity.tenant_id, agent_id)
    settings = request.app.state.settings
    card = agent_card(agent, gateway_url=settings.a2a_gateway_url, auth_mode=settings.auth_mode)
    return card.model_dump(mode="json", exclude_none=True)
