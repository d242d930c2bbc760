"""Audit records of LLM calls, kept with the plan (its choreography bookkeeping's ``audit``).

Each record says what was asked (the prompt), what came back (raw output), from which
model, how long it took, the tokens used and whether the answer passed validation -- with
credentials redacted, since plan state is readable through the memory service.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from soorma.ai._redact import redact

DEFAULT_AUDIT_LIMIT = 50
# Prompts carry event schemas and results; stored trimmed to keep plan records small.
MAX_AUDIT_TEXT = 8000

ATTEMPT_FIRST = "first"
ATTEMPT_REPAIR = "repair"
ATTEMPT_FALLBACK_MODEL = "fallback_model"
ATTEMPT_FALLBACK_PLANNER = "fallback_planner"


def _trim(text: str) -> str:
    return text if len(text) <= MAX_AUDIT_TEXT else text[:MAX_AUDIT_TEXT] + "...(truncated)"


def audit_record(
    *,
    attempt: str,
    model: str | None,
    messages: list[dict[str, str]] | None,
    raw_output: str | None,
    latency_ms: float | None,
    tokens: dict[str, int] | None,
    errors: list[str],
    secrets: Iterable[str] = (),
) -> dict[str, Any]:
    """One redacted audit entry."""
    secrets = tuple(secrets)
    prompt = (
        [{"role": m["role"], "content": _trim(m["content"])} for m in messages]
        if messages is not None
        else None
    )
    entry: dict[str, Any] = redact(
        {
            "at": datetime.now(UTC).isoformat(),
            "attempt": attempt,
            "model": model,
            "prompt": prompt,
            "raw_output": _trim(raw_output) if raw_output is not None else None,
            "latency_ms": round(latency_ms, 2) if latency_ms is not None else None,
            "tokens": tokens or {},
            "valid": not errors,
            "errors": list(errors),
        },
        secrets,
    )
    return entry


__all__ = [
    "ATTEMPT_FALLBACK_MODEL",
    "ATTEMPT_FALLBACK_PLANNER",
    "ATTEMPT_FIRST",
    "ATTEMPT_REPAIR",
    "DEFAULT_AUDIT_LIMIT",
    "audit_record",
]
