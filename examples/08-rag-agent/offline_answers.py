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


def extract_answer(question: str, passages: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """The one or two sentences of the ``(document, text)`` passages that best match
    ``question``, and the documents they come from (``("", [])`` when none matches)."""
    wanted = _words(question)
    scored = []
    for document, text in passages:
        for sentence in _SENTENCE.split(" ".join(text.split())):
            overlap = len(wanted & _words(sentence))
            if overlap:
                scored.append((overlap, sentence, document))
    if not scored:
        return "", []
    scored.sort(key=lambda item: -item[0])
    best = [item for item in scored[:2] if item[0] == scored[0][0]]
    return " ".join(s for _, s, _ in best), sorted({d for _, _, d in best if d})


def decision(question: str, passages: list[tuple[str, str]]) -> dict[str, Any]:
    """The COMPLETE decision answering ``question`` from ``(document, text)`` passages."""
    answer, sources = extract_answer(question, passages)
    result = {
        "answer": answer or "I do not know: the documentation does not say.",
        "sources": sources,
    }
    return {
        "reasoning": "answered from the retrieved knowledge",
        "next_action": {
            "action": "complete",
            "result": result,
            "reasoning": "the retrieved knowledge answers the question",
        },
    }


async def mock_response(context: Any, question: str) -> dict[str, str]:
    """``llm_options`` for :meth:`ChoreographyPlanner.step`: the scripted decision, from
    the best-matching documentation chunk."""
    found = await context.memory.knowledge.search(question, limit=1, tags=["nimbus-docs"])
    passages = [(h.record.parent_external_id or "", h.record.content) for h in found.hits]
    return {"mock_response": json.dumps(decision(question, passages))}
