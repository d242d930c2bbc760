"""Shared DTOs and error types for the Soorma platform.

Pure data: no I/O, no web framework, no SQL.

The A2A models (``soorma_common.a2a``, the largest module) are imported on first use
of one of their names, not with the package: an agent that never speaks A2A does not
pay for them at start-up (issue 9: restart recovery is bounded by import time).
"""

from typing import Any

from soorma_common import bus, decisions, errors, events, knowledge, memory, registry, state
from soorma_common.bus import *  # noqa: F403
from soorma_common.decisions import *  # noqa: F403
from soorma_common.errors import *  # noqa: F403
from soorma_common.events import *  # noqa: F403
from soorma_common.knowledge import *  # noqa: F403
from soorma_common.memory import *  # noqa: F403
from soorma_common.registry import *  # noqa: F403
from soorma_common.state import *  # noqa: F403

__version__ = "0.1.0"

_EAGER = sorted(
    {
        *bus.__all__,
        *decisions.__all__,
        *errors.__all__,
        *events.__all__,
        *knowledge.__all__,
        *memory.__all__,
        *registry.__all__,
        *state.__all__,
    }
)


def __getattr__(name: str) -> Any:
    import importlib

    a2a = importlib.import_module("soorma_common.a2a")
    if name == "a2a":
        return a2a
    if name == "__all__":
        return sorted({*_EAGER, *a2a.__all__})
    if name in a2a.__all__:
        return getattr(a2a, name)
    raise AttributeError(f"module 'soorma_common' has no attribute {name!r}")
