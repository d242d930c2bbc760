"""Embed texts with the long-term memory's model, storing nothing.

For services that compare texts the way memory search does (the A2A gateway ranks its
skills against a message with it). Any authenticated caller of a tenant may call it; the
texts are neither stored nor logged.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from memory_service.routes.longterm_deps import LongTerm
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from servicekit.jsoncheck import NulFree

MAX_TEXTS = 256
MAX_TEXT_CHARS = 8000

router = APIRouter(
    prefix="/v1/memory", tags=["long-term memory"], responses=error_responses(422, 503)
)


class EmbedRequest(BaseModel):
    """Texts to embed: 1 to 256, each 1 to 8,000 characters."""

    model_config = ConfigDict(extra="forbid")

    texts: list[Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS), NulFree]] = Field(
        min_length=1, max_length=MAX_TEXTS
    )


class EmbedResponse(BaseModel):
    """One vector per text, in order, from ``model``."""

    model: str
    dimensions: int
    vectors: list[list[float]]


@router.post("/embeddings", response_model=EmbedResponse)
async def embed_texts(
    body: EmbedRequest, identity: CurrentIdentity, memory: LongTerm
) -> EmbedResponse:
    """Vectors of ``texts`` from the active embedding model (503 when its provider is
    down). Nothing is stored."""
    vectors = await memory.embedder.embed(body.texts)
    return EmbedResponse(
        model=memory.embedder.model,
        dimensions=len(vectors[0]) if vectors else await memory.embedder.dimensions(),
        vectors=vectors,
    )
