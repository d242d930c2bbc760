"""Soorma's own A2A shapes (camelCase wire names), beside the protocol ``a2a-sdk`` speaks.

Two users: the Agent Cards the registry and the gateway serve for registered agents
(``A2AAgentCard``: unlike a2a-sdk's ``AgentSkill``, its skills carry input and output
JSON Schemas, which is what makes a card useful to an LLM caller), and the gateway's
legacy ``POST /tasks/send`` alias (``A2ATask`` in, ``A2ATaskResponse`` out). The current
A2A protocol itself is served through ``a2a-sdk``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field


class A2AAuthType(StrEnum):
    API_KEY = "apiKey"
    OAUTH2 = "oauth2"
    NONE = "none"


class A2AAuthentication(BaseModel):
    schemes: list[A2AAuthType]
    credentials: str | None = None


class A2ASkill(BaseModel):
    id: str
    name: str
    description: str
    tags: list[str] = Field(default_factory=list)
    inputSchema: dict[str, Any] | None = None  # noqa: N815 - legacy wire name
    outputSchema: dict[str, Any] | None = None  # noqa: N815


class A2AAgentCard(BaseModel):
    name: str
    description: str
    url: str
    version: str = "1.0.0"
    provider: dict[str, str] = Field(default_factory=dict)
    capabilities: dict[str, Any] = Field(default_factory=dict)
    skills: list[A2ASkill] = Field(default_factory=list)
    authentication: A2AAuthentication


class A2APart(BaseModel):
    type: Literal["text", "data", "file"]
    text: str | None = None
    data: dict[str, Any] | None = None
    mimeType: str | None = None  # noqa: N815


class A2AMessage(BaseModel):
    role: Literal["user", "agent"]
    parts: list[A2APart]


class A2ATask(BaseModel):
    id: str
    sessionId: str | None = None  # noqa: N815
    message: A2AMessage
    metadata: dict[str, Any] | None = None


class A2ATaskStatus(StrEnum):
    SUBMITTED = "submitted"
    WORKING = "working"
    INPUT_REQUIRED = "input-required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    REJECTED = "rejected"


class A2ATaskResponse(BaseModel):
    id: str
    sessionId: str | None = None  # noqa: N815
    status: A2ATaskStatus
    message: A2AMessage | None = None
    error: str | None = None


__all__ = [
    "A2AAgentCard",
    "A2AAuthType",
    "A2AAuthentication",
    "A2AMessage",
    "A2APart",
    "A2ASkill",
    "A2ATask",
    "A2ATaskResponse",
    "A2ATaskStatus",
]
