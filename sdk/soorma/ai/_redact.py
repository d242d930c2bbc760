"""Redaction of secrets from what the planner records for audit.

Prompts and model outputs are stored with the plan; anything that looks like a credential
is replaced by ``[REDACTED]`` before it is stored, so an audit trail never leaks keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"

# Well-known credential shapes. Kept deliberately broad: a false positive only hides a
# harmless string in an audit record, a false negative leaks a key.
_PATTERNS = [
    re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"),  # OpenAI, Anthropic
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}"),  # Authorization headers
    re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}"),  # JWTs
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),  # Google API key
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),  # Slack tokens
    re.compile(r"\bgsk_[A-Za-z0-9]{20,}"),  # Groq
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),  # Hugging Face
    # key=value / "key": "value" for names that announce a secret.
    re.compile(
        r"(?i)((?:api[_-]?key|secret|password|passwd|access[_-]?token|auth[_-]?token|"
        r"client[_-]?secret|private[_-]?key)[\"']?\s*[:=]\s*[\"']?)([^\s\"',}]{4,})"
    ),
]

_SECRET_KEY_NAMES = re.compile(
    r"(?i)^(api[_-]?key|authorization|password|passwd|secret|.*_secret|.*token|"
    r"private[_-]?key|x-api-key)$"
)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with known secrets and credential-shaped strings replaced.

    Args:
        text: Text to clean.
        secrets: Exact values to remove as well (e.g. the configured API key).
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        if pattern.groups == 2:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like ``value`` with secrets redacted (strings, dicts, lists).

    Values under keys that name a credential (``api_key``, ``authorization``, ...) are
    replaced whatever they look like.
    """
    secrets = tuple(s for s in secrets if s)
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {
            k: REDACTED
            if isinstance(k, str) and _SECRET_KEY_NAMES.match(k) and v
            else redact(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v, secrets) for v in value]
    return value


__all__ = ["REDACTED", "redact", "redact_text"]
