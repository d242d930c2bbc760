"""Redaction of secrets from what the planner records for audit.

Prompts and model outputs are stored with the plan; anything that looks like a credential
is replaced by ``[REDACTED]`` before it is stored, so an audit trail never leaks keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"

# Well-known credential shapes, each with a string that any match contains: a text
# without it is not scanned (a regex pass costs ~30 ns a character, ten of them 3 ms for a
# 7 KB prompt, and most prompts hold no credential at all). Kept deliberately broad: a
# false positive only hides a harmless string in an audit record, a false negative leaks
# a key. The needles of the case-insensitive patterns are looked for in the case-folded
# text, which folds every character ``re`` takes for one of their letters (the long s,
# the Kelvin sign) to that letter; no needle has an "i", whose dotless form re takes for
# "i" but case-folding keeps.
_PATTERNS: list[tuple[tuple[str, ...], bool, re.Pattern[str]]] = [
    # (needles: one of them is in every match, case-insensitive?, pattern)
    (("sk-",), False, re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}")),
    (("bearer",), True, re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}")),  # Authorization
    (
        ("eyJ",),
        False,
        re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}"),  # JWTs
    ),
    (("AKIA",), False, re.compile(r"\bAKIA[0-9A-Z]{16}\b")),  # AWS access key id
    (("AIza",), False, re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}")),  # Google API key
    (
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        False,
        re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    ),  # GitHub tokens
    (("xox",), False, re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),  # Slack tokens
    (("gsk_",), False, re.compile(r"\bgsk_[A-Za-z0-9]{20,}")),  # Groq
    (("hf_",), False, re.compile(r"\bhf_[A-Za-z0-9]{20,}")),  # Hugging Face
    # key=value / "key": "value" for names that announce a secret.
    (
        ("key", "secret", "passw", "token"),
        True,
        re.compile(
            r"(?i)((?:api[_-]?key|secret|password|passwd|access[_-]?token|auth[_-]?token|"
            r"client[_-]?secret|private[_-]?key)[\"']?\s*[:=]\s*[\"']?)([^\s\"',}]{4,})"
        ),
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
    folded = None
    for needles, fold, pattern in _PATTERNS:
        if fold:
            if folded is None:
                folded = text.casefold()
            if not any(needle in folded for needle in needles):
                continue
        elif not any(needle in text for needle in needles):
            continue
        if pattern.groups == 2:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
        folded = None  # the text changed
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
