"""``{goal_data.topic}`` / ``{results.searching.items}`` placeholders in action payloads.

A string that is exactly one placeholder is replaced by the referenced value with its
type kept (a list stays a list); placeholders inside longer strings are rendered as text.
Unknown paths resolve to ``None`` (whole-value) or ``""`` (inside text). Use ``{{`` and
``}}`` for literal braces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_\-]+)*)\}(?!\})")


def resolve_path(path: str, sources: Mapping[str, Any]) -> Any:
    """Follow a dotted path (``results.search.items.0``) through dicts and lists."""
    head, *rest = path.split(".")
    value: Any = sources.get(head)
    for part in rest:
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.lstrip("-").isdigit():
            index = int(part)
            value = value[index] if -len(value) <= index < len(value) else None
        else:
            return None
    return value


def _render(text: str, sources: Mapping[str, Any]) -> Any:
    whole = _PLACEHOLDER.fullmatch(text)
    if whole:
        return resolve_path(whole.group(1), sources)

    def replace(match: re.Match[str]) -> str:
        value = resolve_path(match.group(1), sources)
        return "" if value is None else str(value)

    rendered = _PLACEHOLDER.sub(replace, text)
    return rendered.replace("{{", "{").replace("}}", "}")


def interpolate(template: Any, sources: Mapping[str, Any]) -> Any:
    """Return ``template`` with every placeholder replaced from ``sources`` (recursively)."""
    if isinstance(template, str):
        return _render(template, sources)
    if isinstance(template, Mapping):
        return {key: interpolate(value, sources) for key, value in template.items()}
    if isinstance(template, list):
        return [interpolate(item, sources) for item in template]
    return template
