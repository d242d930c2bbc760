"""Skill-less routing by meaning: the memory service's embeddings of a message and of
each skill's description and examples, compared by cosine similarity.

The memory service embeds with its long-term memory model (``POST /v1/memory/embeddings``;
WordLlama by default, any litellm model when configured). Skill vectors are cached by
their text (and dropped when the model changes), so a routed message costs one small
request: its own text plus any skill not seen yet. When the memory service is not
configured, answers an error, or is unreachable, :meth:`SemanticRanker.choose` returns
``None`` and the caller ranks lexically (:mod:`gateway_a2a.routing`); after a failure the
memory service is left alone for a while, so routing does not wait on it every time.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from gateway_a2a.routing import MAX_TEXT, schema_text
from gateway_a2a.skills import Skill
from soorma.client import Identity, identity_headers

log = logging.getLogger("gateway_a2a.semantic")

EMBEDDINGS_PATH = "/v1/memory/embeddings"
MAX_CACHED = 4096
MAX_TEXTS = 256


def skill_text(skill: Skill) -> str:
    """What a skill is about, in words: its id, description, event and input examples
    (as many characters as a message's text is given, at most)."""
    name = re.sub(r"[-_.]+", " ", skill.id)
    event = re.sub(r"[-_.]+", " ", skill.event)
    parts = (name, skill.description, event, schema_text(skill.schema))
    return " ".join(p for p in parts if p)[:MAX_TEXT]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return dot / norm if norm else 0.0


@dataclass(frozen=True, slots=True)
class Scored:
    skill: Skill
    similarity: float


class SemanticRanker:
    """Ranks skills against a message with the memory service's embeddings."""

    def __init__(
        self,
        memory_url: str | None,
        http: httpx.AsyncClient,
        *,
        token: str | None = None,
        min_similarity: float = 0.25,
        min_margin: float = 0.05,
        timeout_seconds: float = 5.0,
        retry_seconds: float = 30.0,
    ) -> None:
        self.memory_url = memory_url.rstrip("/") if memory_url else None
        self.http = http
        self.token = token
        self.min_similarity = min_similarity
        self.min_margin = min_margin
        self.timeout = timeout_seconds
        self.retry_seconds = retry_seconds
        self.model: str | None = None
        self._vectors: dict[str, list[float]] = {}
        self._down_until = 0.0

    @property
    def available(self) -> bool:
        return self.memory_url is not None and time.monotonic() >= self._down_until

    async def rank(self, tenant: str, skills: Sequence[Skill], text: str) -> list[Scored] | None:
        """``skills`` by similarity to ``text``, best first; ``None`` without embeddings."""
        if not self.available or not skills or not text.strip():
            return None
        texts = [skill_text(s) for s in skills]
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        batch = [text[:MAX_TEXT], *missing][:MAX_TEXTS]
        answer = await self._embed(tenant, batch)
        if answer is None:
            return None
        model, vectors = answer
        if model != self.model:
            # Vectors of another model do not compare with this one's: start over.
            stale = self.model is not None and len(missing) < len(set(texts))
            self._vectors.clear()
            self.model = model
            if stale:
                return await self.rank(tenant, skills, text)
        if len(self._vectors) + len(missing) > MAX_CACHED:
            self._vectors.clear()
        self._vectors.update(zip(batch[1:], vectors[1:], strict=True))
        query = vectors[0]
        scored = [
            Scored(skill, cosine(query, self._vectors[t]))
            for skill, t in zip(skills, texts, strict=True)
            if t in self._vectors
        ]
        scored.sort(key=lambda s: -s.similarity)
        return scored

    async def choose(self, tenant: str, skills: Sequence[Skill], text: str) -> Skill | None:
        """The skill ``text`` is clearly about: similar enough and ahead of the next by
        ``min_margin``; ``None`` when none is, or without embeddings."""
        scored = await self.rank(tenant, skills, text)
        if not scored:
            return None
        best = scored[0]
        second = scored[1].similarity if len(scored) > 1 else -1.0
        log.debug(
            "semantic routing",
            extra={"scores": {s.skill.id: round(s.similarity, 3) for s in scored[:5]}},
        )
        if best.similarity >= self.min_similarity and best.similarity - second >= self.min_margin:
            return best.skill
        return None

    async def _embed(self, tenant: str, texts: list[str]) -> tuple[str, list[list[float]]] | None:
        assert self.memory_url is not None
        headers = identity_headers(Identity(tenant_id=tenant, role="service", token=self.token))
        try:
            reply = await self.http.post(
                f"{self.memory_url}{EMBEDDINGS_PATH}",
                json={"texts": texts},
                headers=headers,
                timeout=self.timeout,
            )
            if reply.status_code != 200:
                raise ValueError(f"HTTP {reply.status_code}: {reply.text[:200]}")
            body = reply.json()
            vectors = [[float(x) for x in v] for v in body["vectors"]]
            if len(vectors) != len(texts):
                raise ValueError(f"{len(vectors)} vectors for {len(texts)} texts")
            return str(body["model"]), vectors
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            self._down_until = time.monotonic() + self.retry_seconds
            log.warning(
                "skill routing by embeddings unavailable, ranking by words for %.0f s: %s",
                self.retry_seconds,
                str(exc)[:300],
            )
            return None
