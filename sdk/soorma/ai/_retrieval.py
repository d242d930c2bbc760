"""The planner's retriever: long-term memory relevant to a decision, put into its prompt.

Knowledge, procedures and past episodes are looked up by the goal and the trigger,
formatted into one labelled section bounded to ``max_chars``, and the ids of what made it
into the prompt are returned for the audit record (provenance).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from soorma.memory import MemoryClient

logger = logging.getLogger("soorma.choreography")

SECTION_TITLE = "Retrieved memory"
# The longest query sent to the memory service (its limit is far above; long goals and
# triggers are mostly payload, and the start of them carries the meaning).
MAX_QUERY_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Retrieval:
    """What a :class:`~soorma.ai.ChoreographyPlanner` retrieves before each decision.

    Attributes:
        knowledge: Most knowledge hits (semantic memory); 0 turns it off.
        procedures: Most procedures (rules, prompt fragments, examples); 0: off.
        episodes: Most past episodes of the planner with the user; 0: off.
        max_chars: Upper bound of the whole section in the prompt.
        min_score: Leave out hits less similar than this (cosine similarity, ``None``:
            keep all). Applies to procedures, episodes and, with ``mode="vector"``,
            knowledge; hybrid knowledge scores are rank-fusion scores (about 0.01-0.03),
            so it does not cut those.
        tags: Only knowledge carrying these tags.
        include_public: Include the tenant's public knowledge and procedures.
        mode: Knowledge ranking, ``"hybrid"`` or ``"vector"``.
        episode_window: Only episodes this recent (``None``: any age).
        agent_id: Whose episodes and procedures (``None``: the planner's name).
    """

    knowledge: int = 5
    procedures: int = 3
    episodes: int = 5
    max_chars: int = 4000
    min_score: float | None = None
    tags: Sequence[str] | None = None
    include_public: bool = True
    mode: Literal["hybrid", "vector"] = "hybrid"
    episode_window: timedelta | None = None
    agent_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("knowledge", "procedures", "episodes"):
            if getattr(self, name) < 0:
                raise ValueError(f"Retrieval.{name} must be 0 or more")
        if self.knowledge > 50:
            raise ValueError("Retrieval.knowledge must be at most 50 (the search limit)")
        if self.max_chars < 200:
            raise ValueError("Retrieval.max_chars must be at least 200")


@dataclass(slots=True)
class Retrieved:
    """One decision's retrieval: the prompt section and the ids in it."""

    section: str = ""
    ids: dict[str, list[str]] = field(
        default_factory=lambda: {"knowledge": [], "procedures": [], "episodes": []}
    )
    error: str | None = None

    def provenance(self) -> dict[str, Any]:
        """What the audit record keeps: the ids in the prompt (and an error, if any)."""
        out: dict[str, Any] = {name: list(ids) for name, ids in self.ids.items()}
        if self.error:
            out["error"] = self.error
        return out


def retrieval_query(goal_event: str | None, goal_data: Any, trigger: str) -> str:
    """The text searched for: the goal (event and data) and what just happened."""
    parts = []
    if goal_event or goal_data:
        data = goal_data if isinstance(goal_data, str) else json.dumps(goal_data, default=str)
        parts.append(f"{goal_event or ''} {data}".strip())
    parts.append(trigger)
    return "\n".join(p for p in parts if p)[:MAX_QUERY_CHARS]


async def retrieve(
    options: Retrieval,
    memory: MemoryClient,
    *,
    query: str,
    agent_id: str,
    now: datetime | None = None,
) -> Retrieved:
    """Look up all three memory types at once and format what was found.

    A failed look-up (memory service or embedding provider down) never fails the
    decision: the planner decides without the section, and the error is audited.
    """
    agent = options.agent_id or agent_id
    since = None
    if options.episode_window is not None:
        since = (now or datetime.now(UTC)) - options.episode_window

    async def nothing() -> list[Any]:
        return []

    async def knowledge() -> list[Any]:
        found = await memory.knowledge.search(
            query,
            limit=options.knowledge,
            include_public=options.include_public,
            tags=options.tags,
            min_score=options.min_score if options.mode == "vector" else None,
            mode=options.mode,
        )
        return list(found.hits)

    async def procedures() -> list[Any]:
        found = await memory.procedures.relevant(
            query, agent_id=agent, limit=options.procedures, min_score=options.min_score
        )
        return [h for h in found.hits if options.include_public or not h.record.public]

    async def episodes() -> list[Any]:
        found = await memory.episodes.search(
            agent, query, limit=options.episodes, since=since, min_score=options.min_score
        )
        return list(found.hits)

    try:
        k_hits, p_hits, e_hits = await asyncio.gather(
            knowledge() if options.knowledge else nothing(),
            procedures() if options.procedures else nothing(),
            episodes() if options.episodes else nothing(),
        )
    except Exception as exc:  # the decision goes on without memory
        logger.warning("planner retrieval failed, deciding without it: %s", exc)
        return Retrieved(error=f"{type(exc).__name__}: {exc}"[:500])
    return format_section(
        options.max_chars,
        procedures=[(h.record.id, _procedure_line(h)) for h in p_hits],
        knowledge=[(h.record.id, _knowledge_line(h)) for h in k_hits],
        episodes=[(h.record.id, _episode_line(h)) for h in e_hits],
    )


def format_section(
    max_chars: int,
    *,
    procedures: Sequence[tuple[str, str]],
    knowledge: Sequence[tuple[str, str]],
    episodes: Sequence[tuple[str, str]],
) -> Retrieved:
    """The labelled section, at most ``max_chars`` long, with the ids it holds.

    Each group gets an even share of the room at first; room a group leaves unused goes
    to the others. Items keep their ranking order, and a long item is cut, not dropped.
    """
    groups: list[tuple[str, str, Sequence[tuple[str, str]]]] = [
        ("procedures", "Procedures that apply (follow them)", procedures),
        ("knowledge", "Knowledge (facts found for this goal)", knowledge),
        ("episodes", "Past interactions with this user", episodes),
    ]
    result = Retrieved()
    present = [g for g in groups if g[2]]
    if not present:
        return result
    header = (
        f"{SECTION_TITLE} (from long-term memory, most relevant first; use what helps, "
        "cite ids in your reasoning):"
    )
    room = max_chars - len(header) - 1
    blocks: list[str] = []
    for index, (name, label, items) in enumerate(present):
        share = room // (len(present) - index)
        lines = [f"## {label}"]
        used = len(lines[0]) + 1
        for item_id, text in items:
            line = f"- [{item_id}] {text}"
            left = share - used - 1
            if left < 40:
                break
            if len(line) > left:
                line = line[: left - 3] + "..."
            lines.append(line)
            used += len(line) + 1
            result.ids[name].append(item_id)
        if len(lines) > 1:
            blocks.append("\n".join(lines))
            room -= used + 1
        # else: nothing fitted; the next groups share the room.
    result.section = "\n".join([header, *blocks]) if blocks else ""
    return result


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _score(hit: Any) -> str:
    return f"score {hit.score:.3f}"


def _knowledge_line(hit: Any) -> str:
    record = hit.record
    where = f", source {record.source}" if record.source else ""
    return f"({_score(hit)}{where}) {_one_line(record.content)}"


def _procedure_line(hit: Any) -> str:
    record = hit.record
    return f"({record.kind}; when {_one_line(record.situation)}) {_one_line(record.content)}"


def _episode_line(hit: Any) -> str:
    record = hit.record
    when = record.created_at.strftime("%Y-%m-%d %H:%M") if record.created_at else ""
    return f"({when} {record.role}) {_one_line(record.content)}"


__all__ = [
    "SECTION_TITLE",
    "Retrieval",
    "Retrieved",
    "format_section",
    "retrieval_query",
    "retrieve",
]
