"""The skills behind the card: the registry's live capabilities, per tenant, cached briefly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from a2a.utils.errors import InvalidParamsError

from gateway_a2a.routing import rank
from soorma.client import Identity
from soorma.registry import RegistryClient

if TYPE_CHECKING:
    from gateway_a2a.semantic import SemanticRanker

# Agent metadata key: "message" makes the gateway answer with a direct A2A message
# (no task) for this agent's skills.
REPLY_MODE_KEY = "a2a_reply"
# The same for one skill: an annotation keyword in its consumed event's payload schema
# (JSON Schema validators ignore unknown keywords; SDK agents declare it with no SDK
# change: EventDefinition(payload_schema={..., "x-a2a-reply": "message"})).
SCHEMA_REPLY_KEY = "x-a2a-reply"
REPLY_MESSAGE = "message"
# The agent chooses per request: an answer with "reply": "message" is a direct message.
REPLY_EITHER = "either"
SKILL_KEYS = ("skill", "skillId", "skill_id")


@dataclass(frozen=True, slots=True)
class Skill:
    """One capability as an A2A skill."""

    id: str
    description: str
    agent: str
    event: str
    topic: str
    schema: dict[str, Any] | None
    tags: tuple[str, ...] = ()
    reply_message: bool = False
    # The agent may answer a request with a direct message instead of a task.
    reply_either: bool = False


@dataclass(slots=True)
class _Entry:
    at: float
    skills: list[Skill] = field(default_factory=list)


class SkillCatalog:
    """Live skills of each tenant from the registry (a short TTL keeps the card fresh)."""

    def __init__(
        self,
        registry_url: str,
        http: httpx.AsyncClient,
        ttl: float,
        token: str | None = None,
        semantic: SemanticRanker | None = None,
    ) -> None:
        self.registry_url = registry_url
        # Ranks skill-less messages by meaning when the memory service embeds.
        self.semantic = semantic
        self.token = token
        self.http = http
        self.ttl = ttl
        self._cache: dict[str, _Entry] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _client(self, tenant: str) -> RegistryClient:
        return RegistryClient(
            base_url=self.registry_url,
            http=self.http,
            identity=Identity(tenant_id=tenant, role="service", token=self.token),
        )

    async def skills(self, tenant: str) -> list[Skill]:
        """The tenant's skills now (registered, not expired)."""
        entry = self._cache.get(tenant)
        if entry is not None and time.monotonic() - entry.at < self.ttl:
            return entry.skills
        lock = self._locks.setdefault(tenant, asyncio.Lock())
        async with lock:
            entry = self._cache.get(tenant)
            if entry is not None and time.monotonic() - entry.at < self.ttl:
                return entry.skills
            skills = await self._load(tenant)
            self._cache[tenant] = _Entry(at=time.monotonic(), skills=skills)
            return skills

    async def _load(self, tenant: str) -> list[Skill]:
        registry = self._client(tenant)
        agents = await registry.list_agents()
        seen: dict[str, Skill] = {}
        for agent in sorted(agents, key=lambda a: (a.name, a.agent_id)):
            agent_replies = agent.metadata.get(REPLY_MODE_KEY) == REPLY_MESSAGE
            agent_chooses = agent.metadata.get(REPLY_MODE_KEY) == REPLY_EITHER
            for cap in agent.capabilities:
                if cap.task_name in seen:
                    continue
                event = cap.consumed_event
                schema = event.payload_schema
                if schema is None:
                    definition = await registry.get_event_cached(event.event_name)
                    schema = definition.payload_schema if definition else None
                seen[cap.task_name] = Skill(
                    id=cap.task_name,
                    description=cap.description or event.description or agent.description,
                    agent=agent.name,
                    event=event.event_name,
                    topic=event.topic,
                    schema=schema,
                    tags=(agent.name, event.event_name),
                    reply_message=agent_replies
                    or (isinstance(schema, dict) and schema.get(SCHEMA_REPLY_KEY) == REPLY_MESSAGE),
                    reply_either=agent_chooses
                    or (isinstance(schema, dict) and schema.get(SCHEMA_REPLY_KEY) == REPLY_EITHER),
                )
        return list(seen.values())

    async def resolve(
        self,
        tenant: str,
        metadata: dict[str, Any],
        *,
        agent: str | None,
        default: str | None,
        text: Callable[[], str] | None = None,
        fits: Callable[[Skill], bool] | None = None,
    ) -> Skill:
        """The skill a message goes to: ``metadata.skill``, else the agent's only skill,
        else the configured default, else the skill ``text`` is about among those that
        take the message (``text`` and ``fits`` are called only then): by meaning when
        the memory service embeds (:mod:`gateway_a2a.semantic`), else, or when no skill
        is clearly closest, by shared words (:mod:`gateway_a2a.routing`).

        Raises:
            InvalidParamsError: no such skill, or none named, no default and no clear match.
        """
        skills = await self.skills(tenant)
        if agent is not None:
            skills = [s for s in skills if s.agent == agent]
            if not skills:
                raise InvalidParamsError(
                    message=f"agent {agent!r} is not registered (or has expired)",
                    data={"field": "agent"},
                )
        wanted = next((str(metadata[k]) for k in SKILL_KEYS if metadata.get(k)), None)
        if wanted is None and agent is not None and len(skills) == 1:
            return skills[0]
        wanted = wanted or default
        names = sorted(s.id for s in skills)
        if wanted is None:
            query = text() if text else ""
            if self.semantic is not None:
                candidates = [s for s in skills if fits is None or fits(s)]
                chosen = await self.semantic.choose(tenant, candidates, query)
                if chosen is not None:
                    return chosen
            return _best_match(skills, names, query, fits)
        for skill in skills:
            if wanted in (skill.id, skill.event):
                return skill
        raise InvalidParamsError(
            message=f"unknown skill {wanted!r}: message.metadata.skill must be one of {names}",
            data={"field": "message.metadata.skill"},
        )


def _best_match(
    skills: list[Skill], names: list[str], text: str, fits: Callable[[Skill], bool] | None
) -> Skill:
    ranked = [r for r in rank(skills, text) if fits is None or fits(r.skill)]
    if len(ranked) == 1 or (len(ranked) > 1 and ranked[0].score > ranked[1].score):
        best: Skill = ranked[0].skill
        return best
    if ranked:
        tied = sorted(r.skill.id for r in ranked if r.score == ranked[0].score)
        reason = f"the message matches the skills {tied} equally"
    else:
        reason = "no skill's description matches the message"
    raise InvalidParamsError(
        message=f"{reason}: name the skill in message.metadata.skill (one of {names})",
        data={"field": "message.metadata.skill", "skills": names},
    )
