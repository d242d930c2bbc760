"""Agent cards: the platform's live skills as the gateway's card (spec 1.0), per-agent
cards, and the seed's legacy card shape."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway_a2a.mapping import _text_field
from gateway_a2a.settings import Settings
from gateway_a2a.skills import Skill, SkillCatalog
from soorma_common.a2a import A2AAgentCard, A2AAuthentication, A2AAuthType, A2ASkill

SCHEMA_EXTENSION = "urn:soorma:a2a:skill-input-schemas:v1"
ROUTING_EXTENSION = "urn:soorma:a2a:skill-routing:v1"


def routing_note(settings: Settings) -> str:
    """How a message finds its skill, in words a generic client's user can read."""
    default = settings.gateway_default_skill
    otherwise = (
        f"otherwise it goes to the default skill {default!r}"
        if default
        else "otherwise to the skill whose description and examples best match its text, "
        "by meaning when the platform can embed text, else by shared words (an error names "
        "the skills when none matches clearly)"
    )
    return f"Name a skill by its id in message.metadata.skill; {otherwise}."


JSONRPC, HTTP_JSON = "JSONRPC", "HTTP+JSON"
VERSION = "1.0.0"


def base_url(settings: Settings, agent: str | None = None) -> str:
    base = settings.gateway_url.rstrip("/")
    return f"{base}/agents/{agent}" if agent else base


def build_card(settings: Settings, skills: list[Skill], *, agent: str | None = None) -> AgentCard:
    """The A2A 1.0 card for these skills (the whole gateway, or one agent's)."""
    base = base_url(settings, agent)
    params = Struct()
    params.update({s.id: {"event": s.event, "inputSchema": s.schema or {}} for s in skills})
    card = AgentCard(
        name=agent or settings.gateway_name,
        description=(
            f"Agent {agent} on the Soorma platform, over A2A. {routing_note(settings)}"
            if agent
            else f"{settings.gateway_description} {routing_note(settings)}"
        ),
        version=VERSION,
        provider=AgentProvider(organization="Soorma", url=settings.gateway_url),
        supported_interfaces=[
            AgentInterface(url=f"{base}/", protocol_binding=JSONRPC, protocol_version="1.0"),
            AgentInterface(url=base, protocol_binding=HTTP_JSON, protocol_version="1.0"),
            AgentInterface(url=f"{base}/", protocol_binding=JSONRPC, protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=settings.gateway_push_enabled,
            extended_agent_card=True,
            extensions=[
                AgentExtension(
                    uri=SCHEMA_EXTENSION,
                    required=False,
                    params=params,
                    description="Each skill's input JSON Schema and the event it is published as.",
                ),
                AgentExtension(
                    uri=ROUTING_EXTENSION,
                    required=False,
                    params=_routing_params(settings),
                    description=routing_note(settings),
                ),
            ],
        ),
        security_schemes=security_schemes(settings),
        security_requirements=security_requirements(settings),
        default_input_modes=["application/json", "text/plain"],
        default_output_modes=["application/json", "text/plain"],
        skills=[_skill(s) for s in skills],
    )
    return card


def _routing_params(settings: Settings) -> Struct:
    fallback = "semantic-match,lexical-match" if settings.memory_url else "lexical-match"
    params = Struct()
    params.update(
        {
            "metadataKey": "skill",
            "defaultSkill": settings.gateway_default_skill or "",
            "fallback": "" if settings.gateway_default_skill else fallback,
        }
    )
    return params


def security_schemes(settings: Settings) -> dict[str, SecurityScheme]:
    """The credentials the gateway verifies: API keys when configured, a bearer JWT when
    it has a key to verify one with."""
    schemes: dict[str, SecurityScheme] = {}
    if settings.gateway_api_keys:
        schemes["apiKey"] = SecurityScheme(
            api_key_security_scheme=APIKeySecurityScheme(
                location="header", name="X-API-Key", description="API key mapped to a tenant"
            )
        )
    if settings.jwt_secret or settings.jwt_public_key:
        schemes["bearer"] = SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer", bearer_format="JWT", description="Platform JWT (its tenant)"
            )
        )
    return schemes


def enforced(settings: Settings) -> bool:
    """Whether a call without credentials is refused (else: dev mode, anonymous)."""
    return settings.auth_mode == "jwt" or bool(settings.gateway_api_keys)


def security_requirements(settings: Settings) -> list[SecurityRequirement]:
    """Any one declared scheme, when credentials are enforced; none in open dev mode."""
    if not enforced(settings):
        return []
    return [
        SecurityRequirement(schemes={name: StringList()}) for name in security_schemes(settings)
    ]


PLACEHOLDER_SKILL = Skill(
    id="gateway",
    description="Placeholder: the served card lists the live skills.",
    agent="gateway",
    event="gateway",
    topic="action-requests",
    schema=None,
    tags=("gateway",),
)


def _skill(skill: Skill) -> AgentSkill:
    modes = ["application/json"]
    if _text_field(skill.schema) is not None:
        modes.append("text/plain")
    examples = (skill.schema or {}).get("examples") if isinstance(skill.schema, dict) else None
    return AgentSkill(
        id=skill.id,
        name=skill.id,
        description=skill.description or skill.event,
        tags=list(skill.tags),
        examples=[
            e if isinstance(e, str) else json.dumps(e)
            for e in (examples if isinstance(examples, list) else [])
        ][:10],
        input_modes=modes,
        output_modes=["application/json", "text/plain"],
    )


def legacy_card(settings: Settings, skills: list[Skill]) -> dict[str, Any]:
    """The seed's ``A2AAgentCard`` (``/.well-known/agent.json``)."""
    schemes = [A2AAuthType.API_KEY, A2AAuthType.OAUTH2]
    if settings.auth_mode == "dev" and not settings.gateway_api_keys:
        schemes.append(A2AAuthType.NONE)
    card = A2AAgentCard(
        name=settings.gateway_name,
        description=settings.gateway_description,
        url=settings.gateway_url,
        version=VERSION,
        provider={"organization": "Soorma"},
        capabilities={"streaming": True, "pushNotifications": settings.gateway_push_enabled},
        skills=[
            A2ASkill(
                id=s.id,
                name=s.id,
                description=s.description or s.event,
                tags=list(s.tags),
                inputSchema=s.schema,
            )
            for s in skills
        ],
        authentication=A2AAuthentication(schemes=schemes),
    )
    seed = card.model_dump(mode="json", exclude_none=True)
    # A 0.3 client reads this path too: the same document is its 0.3 card.
    compat = to_compat_agent_card(build_card(settings, skills)).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    schemas = {s["id"]: s.get("inputSchema") for s in seed["skills"]}
    for skill in compat.get("skills", []):
        if schemas.get(skill["id"]) is not None:
            skill["inputSchema"] = schemas[skill["id"]]
    return {**compat, "url": seed["url"], "authentication": seed["authentication"]}


class CardCache:
    """``ETag``, ``Cache-Control`` and ``Last-Modified`` of a card body, and ``304``.

    ``Last-Modified`` is when this replica first served the body's current content
    (whole seconds); ``If-None-Match`` wins over ``If-Modified-Since`` (RFC 9110 13.2.2).
    """

    def __init__(self, max_age: int, clock: Callable[[], float] = time.time) -> None:
        self.max_age = max_age
        self.clock = clock
        self._since: dict[str, tuple[str, float]] = {}

    def respond(self, request: Request, key: str, body: dict[str, Any]) -> Response:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        known = self._since.get(key)
        if known is None or known[0] != digest:
            known = (digest, float(int(self.clock())))
            self._since[key] = known
        modified = known[1]
        headers = {
            "ETag": f'W/"{digest}"',
            "Cache-Control": f"public, max-age={self.max_age}",
            "Last-Modified": formatdate(modified, usegmt=True),
        }
        match = request.headers.get("if-none-match", "")
        if match:
            if any(
                c.strip().removeprefix("W/") == headers["ETag"].removeprefix("W/")
                for c in match.split(",")
            ):
                return Response(status_code=304, headers=headers)
        elif _not_modified_since(request.headers.get("if-modified-since"), modified):
            return Response(status_code=304, headers=headers)
        return JSONResponse(body, headers=headers)


def _not_modified_since(value: str | None, modified: float) -> bool:
    if not value:
        return False
    try:
        since = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return False
    if since.tzinfo is None:
        return False
    return modified <= since.timestamp()


class CardEndpoints:
    """The card routes that need the request (per-agent and legacy cards)."""

    def __init__(self, settings: Settings, catalog: SkillCatalog) -> None:
        self.settings = settings
        self.catalog = catalog
        self.cache = CardCache(settings.gateway_card_max_age_seconds)

    async def card(self, request: Request) -> Response:
        """``/.well-known/agent-card.json``: the live card, A2A 1.0 JSON only.

        (a2a-sdk's card route folds a whole 0.3 card into the 1.0 JSON when the card
        lists a 0.3 interface; 0.3 clients read ``/.well-known/agent.json``.)
        """
        skills = await self.catalog.skills(self.settings.default_tenant)
        body = MessageToDict(build_card(self.settings, skills))
        return self.cache.respond(request, "card", body)

    async def extended_card(self, _: AgentCard, context: Any) -> AgentCard:
        """``GetExtendedAgentCard``: the caller's own tenant's skills."""
        from gateway_a2a.store import tenant_of

        return build_card(self.settings, await self.catalog.skills(tenant_of(context)))

    async def agent_card(self, request: Request) -> Response:
        agent = request.path_params["agent"]
        skills = [
            s for s in await self.catalog.skills(self.settings.default_tenant) if s.agent == agent
        ]
        if not skills:
            from servicekit.errors import error_response

            return error_response(404, "not_found", f"no live agent named {agent!r}")
        body = MessageToDict(build_card(self.settings, skills, agent=agent))
        return self.cache.respond(request, f"agent:{agent}", body)

    async def legacy(self, request: Request) -> Response:
        skills = await self.catalog.skills(self.settings.default_tenant)
        return self.cache.respond(request, "legacy", legacy_card(self.settings, skills))
