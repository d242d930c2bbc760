"""Which skill a message that names none goes to: a lexical match of its text.

A generic A2A client does not know the ``metadata.skill`` convention. When no skill is
named and no default is configured, the message's words are scored against each skill's
words (id, description, event name, tags, and the ``examples``, ``title``,
``description`` and property names of its input schema). A word counts more the fewer
skills have it; a skill whose schema does not take the message is not a candidate (the
caller checks). The best score wins when it is ahead of the next; a tie or no shared word
is an error that names the skills.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by do for from how i in is it me my of on or please the this "
    "to we what with you your can could would should".split()
)
_SUFFIXES = ("ing", "ed", "es", "s")
MAX_TEXT = 4000


class Matchable(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def event(self) -> str: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def schema(self) -> dict[str, Any] | None: ...


def _stem(word: str) -> str:
    """A crude stem: "translates", "translating", "translated" → "translat"."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


def words(text: str) -> set[str]:
    """The stemmed content words of ``text`` (camelCase and snake_case split)."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text[:MAX_TEXT]).lower()
    return {_stem(w) for w in _WORD.findall(spaced) if w not in _STOP and len(w) > 1}


def schema_text(schema: dict[str, Any] | None) -> str:
    """The human words of an input schema: examples, title, description, property names."""
    if not isinstance(schema, dict):
        return ""
    parts: list[str] = []
    for key in ("title", "description"):
        if isinstance(schema.get(key), str):
            parts.append(schema[key])
    for example in schema.get("examples") or []:
        parts.append(example if isinstance(example, str) else json.dumps(example))
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, spec in properties.items():
            parts.append(str(name))
            if isinstance(spec, dict) and isinstance(spec.get("description"), str):
                parts.append(spec["description"])
    return " ".join(parts)


def skill_words(skill: Matchable) -> set[str]:
    return words(
        " ".join([skill.id, skill.description, skill.event, *skill.tags, schema_text(skill.schema)])
    )


@dataclass(frozen=True, slots=True)
class Ranked:
    skill: Any
    score: float


def rank(skills: Sequence[Matchable], text: str) -> list[Ranked]:
    """Skills sharing a word with ``text``, best first (score > 0 only)."""
    query = words(text)
    vocab = [skill_words(s) for s in skills]
    if not query:
        return []
    ranked = []
    for skill, own in zip(skills, vocab, strict=True):
        score = sum(1.0 / sum(1 for v in vocab if w in v) for w in query & own)
        if score > 0:
            ranked.append(Ranked(skill, score))
    ranked.sort(key=lambda r: -r.score)
    return ranked


def message_text(texts: Iterable[str], data: Iterable[Any]) -> str:
    """What a message says, for matching: its text parts and its data values."""
    parts = list(texts)
    for item in data:
        parts.append(json.dumps(item) if not isinstance(item, str) else item)
    return " ".join(parts)
