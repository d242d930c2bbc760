"""Terminal colours for the ``soorma`` command (ANSI; off unless wanted).

Colour is used when the output is a terminal and ``NO_COLOR`` is not set
(https://no-color.org), or when asked for with ``--color always``.
"""

from __future__ import annotations

from typing import TextIO

from soorma.settings import no_color

_CODES = {
    "dim": "2",
    "topic": "36",  # cyan
    "type": "1;33",  # bold yellow
    "ok": "32",
    "error": "31",
}


def use_color(choice: str, stream: TextIO) -> bool:
    """Whether to colour ``stream``: ``always``, ``never`` or ``auto``."""
    if choice == "always":
        return True
    if choice == "never" or no_color():
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def paint(text: str, style: str, enabled: bool) -> str:
    """``text`` in ``style`` when ``enabled``; unchanged otherwise."""
    if not enabled:
        return text
    return f"\033[{_CODES[style]}m{text}\033[0m"


__all__ = ["paint", "use_color"]
