"""soorma.testing: test agents against an in-process Soorma platform.

::

    from soorma.testing import PlatformHarness

    async with PlatformHarness() as platform:
        await platform.start(my_tool)
        answer = await platform.call("greet.requested", {"name": "Ada"},
                                     response_event="greet.completed")

The harness runs the real event, memory and registry services in the test's process
(embedded backends, no ports). Their packages are needed where tests run, not by
``soorma`` itself: nothing here imports them until a harness starts. Its memory service
embeds with :class:`DeterministicEmbedder` (no model, no network).
See ``docs/testing.md``.
"""

from soorma.testing._embeddings import DeterministicEmbedder
from soorma.testing._llm import LLMCall, ScriptedLLM, ScriptExhausted
from soorma.testing._recorder import EventRecorder
from soorma.testing.harness import PendingAnswer, PlatformHarness, RunningAgents

__all__ = [
    "DeterministicEmbedder",
    "EventRecorder",
    "LLMCall",
    "PendingAnswer",
    "PlatformHarness",
    "RunningAgents",
    "ScriptExhausted",
    "ScriptedLLM",
]
