"""A2A Agent Card for a registered agent.

Uses the legacy ``soorma_common.a2a`` shapes: the a2a-sdk 1.x ``AgentSkill`` (protobuf)
has no input/output schema fields, and the schemas are what makes a card useful to an
LLM caller. External clients reach the agent through the A2A gateway, so ``url`` is the
gateway's address for it.
"""

from __future__ import annotations

from soorma_common.a2a import A2AAgentCard, A2AAuthentication, A2AAuthType, A2ASkill
from soorma_common.registry import AgentCapability, AgentDefinition


def _skill(cap: AgentCapability) -> A2ASkill:
    produced = cap.produced_events[0] if cap.produced_events else None
    output = produced.payload_schema if produced else None
    return A2ASkill(
        id=cap.task_name,
        name=cap.task_name,
        description=cap.description or cap.consumed_event.description,
        tags=[cap.consumed_event.event_name, cap.consumed_event.topic],
        inputSchema=cap.consumed_event.payload_schema,
        outputSchema=output if output is not None else cap.consumed_event.response_schema,
    )


def agent_card(agent: AgentDefinition, *, gateway_url: str, auth_mode: str) -> A2AAgentCard:
    """Build the card: one skill per capability, input schema = consumed event's payload.

    Args:
        agent: the registered agent.
        gateway_url: base URL of the A2A gateway that fronts this platform.
        auth_mode: the platform auth mode; ``jwt`` callers need a bearer token.
    """
    scheme = A2AAuthType.OAUTH2 if auth_mode == "jwt" else A2AAuthType.NONE
    return A2AAgentCard(
        name=agent.name,
        description=agent.description,
        url=f"{gateway_url.rstrip('/')}/agents/{agent.agent_id}",
        version=agent.version,
        provider={"organization": agent.tenant_id or "soorma"},
        capabilities={"streaming": False, "pushNotifications": True},
        skills=[_skill(cap) for cap in agent.capabilities],
        authentication=A2AAuthentication(schemes=[scheme]),
    )
