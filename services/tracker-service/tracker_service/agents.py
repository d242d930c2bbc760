"""``GET /v1/tracker/agents``: the tenant's registered agents with their heartbeat and
consumer lag.

Nothing is stored here: each request reads the registry (agents, also those past their
TTL, until the registry purges them) and the event service (consumer groups) as the
caller's tenant, and :func:`connected_agents` joins the two. An agent's consumer group
is its name, as the SDK subscribes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from servicekit.auth import CurrentIdentity
from servicekit.errors import error_responses
from servicekit.jsonresp import ORJSONResponse
from soorma.bus import BusClient
from soorma.registry import RegistryClient
from soorma_common.agent_status import ConnectedAgent, ConnectedAgentList, GroupLag
from soorma_common.bus import ConsumerGroupList, ConsumerGroupStatus
from soorma_common.errors import ServiceUnavailable, SoormaError
from soorma_common.registry import AgentDefinition
from tracker_service.state import Tracker

router = APIRouter(prefix="/v1/tracker", tags=["agents"], responses=error_responses(422))

# The page refreshes every few seconds: a slow dependency must not pile requests up.
LOOKUP_TIMEOUT = 5.0


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(n for n in names if n))


def _group_lag(group: str, rows: Sequence[ConsumerGroupStatus]) -> GroupLag:
    times = [r.last_delivered_at for r in rows if r.last_delivered_at is not None]
    return GroupLag(
        group=group,
        lag=sum(r.lag for r in rows),
        pending=sum(r.pending for r in rows),
        last_delivered_at=max(times) if times else None,
        topics=list(rows),
    )


def _agent(agent: AgentDefinition, group: GroupLag | None, now: datetime) -> ConnectedAgent:
    caps = agent.capabilities
    seen = agent.last_heartbeat
    if seen is not None and seen.tzinfo is None:
        seen = seen.replace(tzinfo=UTC)
    expires = seen + timedelta(seconds=agent.ttl_seconds) if seen else None
    return ConnectedAgent(
        agent_id=agent.agent_id,
        name=agent.name,
        description=agent.description,
        version=agent.version,
        agent_type=agent.agent_type,
        capabilities=_unique(c.task_name for c in caps),
        consumes=_unique([*(c.consumed_event.event_name for c in caps), *agent.events_consumed]),
        produces=_unique(
            [*(e.event_name for c in caps for e in c.produced_events), *agent.events_produced]
        ),
        topics=_unique(c.consumed_event.topic for c in caps),
        last_seen=seen,
        ttl_seconds=agent.ttl_seconds,
        expires_at=expires,
        stale=expires is None or expires <= now,
        consumer_group=group,
    )


def group_of(agent: AgentDefinition) -> str:
    """The consumer group ``agent`` reads with: the one it registered (SDK agents record
    it in ``metadata.consumer_group``), otherwise its name (the SDK's default)."""
    group = agent.metadata.get("consumer_group")
    return group if isinstance(group, str) and group else agent.name


def connected_agents(
    agents: Sequence[AgentDefinition],
    groups: ConsumerGroupList | None,
    *,
    now: datetime,
    errors: Sequence[str] = (),
) -> ConnectedAgentList:
    """Join registered agents with their consumer groups (see :func:`group_of`).

    ``groups`` is ``None`` when the event service could not be asked: every agent's
    ``consumer_group`` is then null (unknown, not zero).
    """
    by_group: dict[str, list[ConsumerGroupStatus]] = {}
    for row in groups.groups if groups else []:
        by_group.setdefault(row.group, []).append(row)
    lags = {name: _group_lag(name, rows) for name, rows in by_group.items()}
    rows = [
        _agent(a, lags.get(group_of(a)), now)
        for a in sorted(agents, key=lambda a: (a.name, a.agent_id))
    ]
    named = {group_of(a) for a in agents}
    return ConnectedAgentList(
        agents=rows,
        other_groups=[lags[name] for name in sorted(lags) if name not in named],
        checked_at=now,
        lag_complete=groups.complete if groups else False,
        errors=list(errors),
    )


@router.get(
    "/agents",
    response_model=ConnectedAgentList,
    summary="Registered agents: capabilities, events, last heartbeat and consumer lag",
    responses=error_responses(503),
)
async def list_connected_agents(
    identity: CurrentIdentity,
    tracker: Tracker,
    stale: Annotated[
        bool, Query(description="Include agents past their TTL (until the registry purges them)")
    ] = True,
) -> ORJSONResponse:
    """The caller's agents, as the registry and the event service know them now.

    503 when the registry cannot be read (or answers an error). When the event service
    cannot, the agents are listed with ``consumer_group: null`` and ``errors`` says why.
    """
    assert tracker.bus is not None
    tenant = identity.tenant_id
    bus: BusClient = tracker.bus.acting_as(tenant_id=tenant)
    registry = RegistryClient(
        base_url=tracker.settings.registry_url,
        http=bus.http,
        identity=bus.identity,
        timeout=LOOKUP_TIMEOUT,
        connect_retries=0,
    )
    bus.timeout = LOOKUP_TIMEOUT  # a copy: the projector's client keeps its own
    found, groups = await asyncio.gather(
        registry.list_agents(include_expired=stale),
        bus.consumer_groups(),
        return_exceptions=True,
    )
    if isinstance(found, SoormaError) and not isinstance(found, ServiceUnavailable):
        # Whatever the registry answered (a refusal, a 404 from something else on that
        # address), this caller cannot fix it: the tracker's dependency is not usable.
        raise ServiceUnavailable(
            f"registry at {registry.base_url}: {found}", details={"registry_error": found.code}
        ) from found
    if isinstance(found, BaseException):
        raise found
    errors = []
    if isinstance(groups, BaseException):
        if not isinstance(groups, Exception):
            raise groups  # cancellation
        # The agents are still worth showing: their lag is reported unknown, with why.
        errors.append(f"event service: {groups}")
        groups = None
    listing = connected_agents(found, groups, now=datetime.now(UTC), errors=errors)
    return ORJSONResponse(listing.model_dump(mode="json"))
