"""Procedural memory (know-how): ``context.memory.procedures``.

Rules, system-prompt fragments and few-shot examples, each with the situation it applies
to. "What applies here" ranks the agent's and user's own procedures together with the
tenant-wide (public) ones.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from typing import Any

from soorma._longterm import Send, records_of, request_body
from soorma._segments import path_segment
from soorma_common.errors import NotFound
from soorma_common.knowledge import (
    MemoryKind,
    ProcedureCreate,
    ProcedureQuery,
    ProcedureQueryResult,
    ProcedureRecord,
)

DEFAULT_RELEVANT_LIMIT = 5

_BASE = "/v1/memory/procedures"


class ProceduralMemory:
    """Know-how for the user the memory client acts as, and the tenant's shared know-how.

    Get it as ``context.memory.procedures``::

        await context.memory.procedures.add(
            "Always quote the order id in a refund answer.",
            kind="rule", situation="a customer asks about a refund", agent_id="support-bot",
        )
        applies = await context.memory.procedures.relevant("refund for order 1042",
                                                           agent_id="support-bot")
    """

    def __init__(self, send: Send) -> None:
        self._send = send

    async def add(
        self,
        content: str,
        *,
        situation: str,
        kind: MemoryKind = "rule",
        agent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Iterable[str] = (),
        public: bool = False,
    ) -> ProcedureRecord:
        """Store a rule, prompt fragment or example.

        Args:
            content: The rule, the prompt text, or the example.
            situation: When it applies, in words (what :meth:`relevant` matches).
            kind: ``"rule"``, ``"prompt"`` or ``"example"``.
            agent_id: The agent it is for (``None``: any agent).
            metadata: JSON fields kept with it.
            tags: Labels.
            public: Shared with every user of the tenant (default: this user only).
        """
        body = request_body(
            ProcedureCreate,
            agent_id=agent_id,
            kind=kind,
            content=content,
            situation=situation,
            metadata=dict(metadata or {}),
            tags=list(tags),
            public=public,
        )
        data = await self._send("POST", _BASE, json=body)
        return ProcedureRecord.model_validate(data)

    async def relevant(
        self,
        query: str,
        *,
        agent_id: str | None = None,
        kinds: Iterable[MemoryKind] | None = None,
        limit: int = DEFAULT_RELEVANT_LIMIT,
        min_score: float | None = None,
    ) -> ProcedureQueryResult:
        """The procedures that best fit the situation ``query`` describes, best first.

        Args:
            query: The situation, in words.
            agent_id: Include this agent's procedures (those for any agent always count).
            kinds: Only these kinds.
            limit: Most hits.
            min_score: Leave out hits scoring lower.
        """
        body = request_body(
            ProcedureQuery,
            query=query,
            agent_id=agent_id,
            kinds=list(kinds) if kinds is not None else None,
            limit=limit,
            min_score=min_score,
        )
        data = await self._send("POST", f"{_BASE}/relevant", json=body)
        return ProcedureQueryResult.model_validate(data)

    async def list(
        self, *, agent_id: str | None = None, kind: MemoryKind | None = None
    ) -> builtins.list[ProcedureRecord]:
        """The procedures visible to this user, optionally of one agent or kind."""
        params: dict[str, Any] = {}
        if agent_id is not None:
            params["agent_id"] = agent_id
        if kind is not None:
            params["kind"] = kind
        data = await self._send("GET", _BASE, params=params)
        return [ProcedureRecord.model_validate(r) for r in records_of(data)]

    async def get(self, procedure_id: str) -> ProcedureRecord | None:
        """One procedure, or ``None`` when there is none visible to this user."""
        try:
            data = await self._send("GET", f"{_BASE}/{path_segment(procedure_id)}")
        except NotFound:
            return None
        return ProcedureRecord.model_validate(data)

    async def delete(self, procedure_id: str) -> bool:
        """Delete one procedure; ``False`` when there was none."""
        try:
            await self._send("DELETE", f"{_BASE}/{path_segment(procedure_id)}")
        except NotFound:
            return False
        return True


__all__ = ["DEFAULT_RELEVANT_LIMIT", "ProceduralMemory"]
