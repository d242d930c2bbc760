"""The scripted "model" of ``planner.py --offline``: an extractive answer.

Offline, the decision still goes through litellm (as ``mock_response``) and the
planner's validation, and the planner still retrieves memory into the prompt (see the
plan's audit). Only the answer is scripted: the sentences of the best-matching
knowledge that share the most words with the question.
"""

from __future__ import annotations

import json
import re
from typing import Any

_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# Words too common to say whether a sentence answers the question.
_COMMON = frozenset(
    "a an and are as at be by can do does for how i in is it my of on or the to what "
    "when where which who why with you your".split()
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _COMMON}


def extract_answer(question: str, passages: list[str]) -> str | None:
    """The one or two sentences of ``passages`` that best match ``question``."""
    wanted = _words(question)
    scored = []
    for passage in passages:
        for sentence in _SENTENCE.split(" ".join(passage.split())):
            overlap = len(wanted & _words(sentence))
            if overlap and not sentence.startswith("#"):
                scored.append((overlap, sentence))
    if not scored:
        return None
    scored.sort(key=lambda pair: -pair[0])
    best = [s for overlap, s in scored[:2] if overlap == scored[0][0]]
    return " ".join(best)


async def mock_response(context: Any, question: str) -> dict[str, str]:
    """``llm_options`` for :meth:`ChoreographyPlanner.step`: the scripted decision."""
    found = await context.memory.knowledge.search(question, limit=3, tags=["nimbus-docs"])
    hits = found.hits[:1]
    answer = extract_answer(question, [h.record.content for h in hits])
    if answer is None:
        result: dict[str, Any] = {
            "answer": "I do not know: the documentation does not say.",
            "sources": [],
        }
    else:
        sources = sorted({h.record.parent_external_id or h.record.source or "" for h in hits})
        result = {"answer": answer, "sources": sources}
    decision = {
        "reasoning": "answered from the retrieved knowledge",
        "next_action": {
            "action": "complete",
            "result": result,
            "reasoning": "the retrieved knowledge answers the question",
        },
    }
    return {"mock_response": json.dumps(decision)}
