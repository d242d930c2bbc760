"""Shared DTOs and error types for the Soorma platform.

Pure data: no I/O, no web framework, no SQL.
"""

from soorma_common import a2a, bus, decisions, errors, events, memory, registry, state
from soorma_common.a2a import *  # noqa: F403
from soorma_common.bus import *  # noqa: F403
from soorma_common.decisions import *  # noqa: F403
from soorma_common.errors import *  # noqa: F403
from soorma_common.events import *  # noqa: F403
from soorma_common.memory import *  # noqa: F403
from soorma_common.registry import *  # noqa: F403
from soorma_common.state import *  # noqa: F403

__version__ = "0.1.0"

__all__ = sorted(
    {
        *a2a.__all__,
        *bus.__all__,
        *decisions.__all__,
        *errors.__all__,
        *events.__all__,
        *memory.__all__,
        *registry.__all__,
        *state.__all__,
    }
)
