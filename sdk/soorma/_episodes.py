"""Episodic memory (experience): ``context.memory.episodes``.

What was said and done, by whom and when: each episode belongs to one agent and one user,
and only that agent, acting for that user, reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from soorma._longterm import Send, records_of, request_body
from soorma._segments import path_segment
from soorma_common.errors import NotFound
from soorma_common.knowledge import (
    EpisodeCreate,
    EpisodeRecord,
    EpisodeRole,
    EpisodeSearch,
    EpisodeSearchResult,
)

DEFAULT_RECENT_LIMIT = 10
DEFAULT_EPISODE_SEARCH_LIMIT = 10

_BASE = "/v1/memory/episodes"


class EpisodicMemory:
    """The interactions an agent had with the user the memory client acts as.

    Get it as ``context.memory.episodes``::

        await context.memory.episodes.log("support-bot", "user", "My order 1042 is late")
        window = await context.memory.episodes.recent("support-bot", limit=20)
        earlier = await context.memory.episodes.search("support-bot", "late delivery")
    """

    def __init__(self, send: Send) -> None:
        self._send = send

    async def log(
        self,
        agent_id: str,
        role: EpisodeRole,
        content: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        plan_id: str | None = None,
    ) -> EpisodeRecord:
        """Record one interaction.

        Args:
            agent_id: The agent it happened with.
            role: ``"user"``, ``"assistant"``, ``"system"`` or ``"tool"``.
            content: What was said or done.
            metadata: JSON fields kept with it.
            session_id: The conversation it belongs to.
            plan_id: The plan it belongs to.

        Raises:
            ValidationFailed: an unknown role, empty or oversized content.
        """
        body = request_body(
            EpisodeCreate,
            agent_id=agent_id,
            role=role,
            content=content,
            metadata=dict(metadata or {}),
            session_id=session_id,
            plan_id=plan_id,
        )
        data = await self._send("POST", _BASE, json=body)
        return EpisodeRecord.model_validate(data)

    async def recent(
        self,
        agent_id: str,
        *,
        limit: int = DEFAULT_RECENT_LIMIT,
        session_id: str | None = None,
    ) -> list[EpisodeRecord]:
        """The agent's latest ``limit`` interactions with this user, oldest first (a
        context window to put before the next model call)."""
        params: dict[str, Any] = {"agent_id": agent_id, "limit": limit}
        if session_id is not None:
            params["session_id"] = session_id
        data = await self._send("GET", f"{_BASE}/recent", params=params)
        return [EpisodeRecord.model_validate(r) for r in records_of(data)]

    async def search(
        self,
        agent_id: str,
        query: str,
        *,
        limit: int = DEFAULT_EPISODE_SEARCH_LIMIT,
        since: datetime | None = None,
        until: datetime | None = None,
        session_id: str | None = None,
        min_score: float | None = None,
    ) -> EpisodeSearchResult:
        """The agent's interactions with this user closest in meaning to ``query``.

        Args:
            agent_id: Whose episodes.
            query: What to look for, in words.
            limit: Most hits.
            since: Only episodes at or after this time.
            until: Only episodes before this time.
            session_id: Only episodes of this conversation.
            min_score: Leave out hits scoring lower.
        """
        body = request_body(
            EpisodeSearch,
            agent_id=agent_id,
            query=query,
            limit=limit,
            since=since,
            until=until,
            session_id=session_id,
            min_score=min_score,
        )
        data = await self._send("POST", f"{_BASE}/search", json=body)
        return EpisodeSearchResult.model_validate(data)

    async def delete(self, episode_id: str) -> bool:
        """Delete one episode; ``False`` when there was none."""
        try:
            await self._send("DELETE", f"{_BASE}/{path_segment(episode_id)}")
        except NotFound:
            return False
        return True


__all__ = ["DEFAULT_RECENT_LIMIT", "EpisodicMemory"]
